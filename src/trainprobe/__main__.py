from trainprobe.cli import main

raise SystemExit(main())
