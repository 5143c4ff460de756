# snapshot: see the top-level Makefile.am
