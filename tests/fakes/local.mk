# tests/fakes: see the top-level Makefile.am
