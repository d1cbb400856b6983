from zerorename.testing.sink.server import main

raise SystemExit(main())
