# tests: see the top-level Makefile.am
