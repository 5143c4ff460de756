# tests/fakes: drivers on host memory that stand in for a GPU in tests (README.md).
#
# The fakes are plain shared objects with the real drivers' file names and sonames
# (libtool would add its own naming and .libs/ indirection), built by explicit rules.
# A test that needs one lists it in EXTRA_<test>_DEPENDENCIES, e.g.
#   EXTRA_tests_x_y_t_DEPENDENCIES = $(FAKE_CUDA_LIB)
# and points LD_LIBRARY_PATH (CUDA) or ZE_ENABLE_ALT_DRIVERS (Level Zero) at it.
FAKE_CUDA_LIB = tests/fakes/libcuda.so.1
FAKE_ZE_LIB = tests/fakes/libze_fake.so
# The fakes define the drivers' functions with no header to declare them first.
FAKE_CFLAGS = -std=gnu11 $(WARN_CFLAGS) -Wno-missing-prototypes $(SAN_CFLAGS) -pthread \
	-fPIC -fvisibility=hidden
FAKE_LINKFLAGS = -shared -Wl,-Bsymbolic-functions $(NO_UNDEFINED_LDFLAGS) $(SAN_LDFLAGS) -pthread

EXTRA_DIST += tests/fakes/fake_cuda.c tests/fakes/fake_mem.c tests/fakes/fake_mem.h \
	tests/fakes/README.md
CLEANFILES += $(FAKE_CUDA_LIB)

FAKE_MEM_SRC = $(srcdir)/tests/fakes/fake_mem.c $(srcdir)/tests/fakes/fake_mem.h
$(FAKE_CUDA_LIB): $(srcdir)/tests/fakes/fake_cuda.c $(FAKE_MEM_SRC) \
		$(srcdir)/libtrace/mtx/cuda_driver.h
	@$(MKDIR_P) tests/fakes
	$(AM_V_CCLD)$(CC) $(CPPFLAGS) -I$(srcdir)/libtrace $(FAKE_CFLAGS) $(CFLAGS) $(FAKE_LINKFLAGS) $(LDFLAGS) \
		-Wl,-soname,libcuda.so.1 -o $@ $(srcdir)/tests/fakes/fake_cuda.c \
		$(srcdir)/tests/fakes/fake_mem.c

check_PROGRAMS += tests/fakes/fake_cuda-t
TESTS += tests/fakes/fake_cuda-t
tests_fakes_fake_cuda_t_CPPFLAGS = $(AM_CPPFLAGS) \
	-DFAKE_LIBDIR='"$(abs_top_builddir)/tests/fakes"'
tests_fakes_fake_cuda_t_LDADD = $(LIBS)
EXTRA_tests_fakes_fake_cuda_t_DEPENDENCIES = $(FAKE_CUDA_LIB)

# The real CUDA runtime, static and shared, must see "no device" through the fake.
if HAVE_CUDART
check_PROGRAMS += tests/fakes/cudart_static_prog tests/fakes/cudart_shared_prog
tests_fakes_cudart_static_prog_SOURCES = tests/fakes/cudart_prog.c
tests_fakes_cudart_static_prog_CPPFLAGS = $(AM_CPPFLAGS) -I$(CUDA_DIR)/include
tests_fakes_cudart_static_prog_LDADD = $(CUDA_DIR)/lib64/libcudart_static.a -ldl -lrt -lpthread
tests_fakes_cudart_shared_prog_SOURCES = tests/fakes/cudart_prog.c
tests_fakes_cudart_shared_prog_CPPFLAGS = $(AM_CPPFLAGS) -I$(CUDA_DIR)/include
tests_fakes_cudart_shared_prog_LDADD = -L$(CUDA_DIR)/lib64 -lcudart
tests_fakes_cudart_shared_prog_LDFLAGS = $(AM_LDFLAGS) -Wl,-rpath,$(CUDA_DIR)/lib64
tests_fakes_fake_cuda_t_CPPFLAGS += -DFAKE_CUDART_PROGS=1
EXTRA_tests_fakes_fake_cuda_t_DEPENDENCIES += tests/fakes/cudart_static_prog \
	tests/fakes/cudart_shared_prog
endif
EXTRA_DIST += tests/fakes/cudart_prog.c

# The Level Zero driver, for the real loader (ZE_ENABLE_ALT_DRIVERS=<absolute path>).
EXTRA_DIST += tests/fakes/fake_ze.c
check_PROGRAMS += tests/fakes/fake_ze-t
TESTS += tests/fakes/fake_ze-t
tests_fakes_fake_ze_t_CPPFLAGS = $(AM_CPPFLAGS) \
	-DFAKE_LIBDIR='"$(abs_top_builddir)/tests/fakes"'
tests_fakes_fake_ze_t_LDADD = $(ZE_LIBS) $(LIBS)
if HAVE_LEVEL_ZERO
CLEANFILES += $(FAKE_ZE_LIB)
$(FAKE_ZE_LIB): $(srcdir)/tests/fakes/fake_ze.c $(FAKE_MEM_SRC)
	@$(MKDIR_P) tests/fakes
	$(AM_V_CCLD)$(CC) $(CPPFLAGS) $(ZE_CFLAGS) $(FAKE_CFLAGS) $(CFLAGS) $(FAKE_LINKFLAGS) \
		$(LDFLAGS) -Wl,-soname,libze_fake.so -o $@ $(srcdir)/tests/fakes/fake_ze.c \
		$(srcdir)/tests/fakes/fake_mem.c
EXTRA_tests_fakes_fake_ze_t_DEPENDENCIES = $(FAKE_ZE_LIB)
endif
