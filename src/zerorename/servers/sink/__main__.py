from zerorename.servers.sink.server import main

raise SystemExit(main())
