from zerorename.perf.sink.server import main

raise SystemExit(main())
