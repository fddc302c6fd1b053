from trainprobe.cli import main

main()
