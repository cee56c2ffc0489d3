from runtime.cli import main

main()
