# examples: see the top-level Makefile.am
