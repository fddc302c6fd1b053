from trainprobe.mcp import main

main()
