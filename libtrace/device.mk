# libtrace: see the top-level Makefile.am
