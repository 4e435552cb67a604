import sys

from fit import main

sys.exit(main())
