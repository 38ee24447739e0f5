from duckstream.cli import main

raise SystemExit(main())
