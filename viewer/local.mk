# viewer: see the top-level Makefile.am
