from llmaz.cli import main

main()
