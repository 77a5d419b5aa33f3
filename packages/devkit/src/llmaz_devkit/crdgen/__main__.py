from llmaz_devkit.crdgen.writer import main

raise SystemExit(main())
