from banana100.cli import main

raise SystemExit(main())
