# tests/fuzz/fuzz.mk: the fuzz harnesses (included by Makefile.am; README "Tests").
#
#   make fuzz [FUZZ_SECONDS=60] [FUZZ_TARGETS="sse usage"]   fuzz each target for N seconds
#   make fuzz-replay                 every seed corpus once, as a regression test: one line
#                                    per target and "N passed, N failed"
#   make fuzz-replay FUZZ_ENGINE=standalone FUZZ_CC=gcc   the same without libFuzzer
#
# The harnesses link the pure modules compiled again, with FUZZ_CC and the sanitizers,
# into tests/fuzz/build-$(FUZZ_ENGINE)/ (objects, binaries, new corpus entries,
# crash artifacts): the normal build is never touched. Seeds live in
# tests/fuzz/corpus/<target>/ and are read, never written.
FUZZ_CC = clang
FUZZ_SECONDS = 60
FUZZ_ENGINE = libfuzzer
FUZZ_TARGETS = sse usage pathcheck metrics dcgm conf settings guard \
	anthropic_request anthropic_response anthropic_stream \
	messages_request messages_response messages_stream dialect screen
FUZZ_DIR = tests/fuzz/build-$(FUZZ_ENGINE)
FUZZ_SANITIZE = -fsanitize=address,undefined -fno-sanitize-recover=undefined -fno-omit-frame-pointer
# libFuzzer instruments the code for coverage and supplies main(); standalone.c is the
# plain main() for compilers without it.
FUZZ_ENGINE_CFLAGS_libfuzzer = -fsanitize=fuzzer-no-link
FUZZ_ENGINE_LDFLAGS_libfuzzer = -fsanitize=fuzzer
FUZZ_ENGINE_OBJS_standalone = $(FUZZ_DIR)/tests/fuzz/standalone.o
FUZZ_CFLAGS = -g -O1 -std=gnu11 -D_GNU_SOURCE -pthread -Wall -Wextra -Wno-unused-parameter \
	$(FUZZ_SANITIZE) $(FUZZ_ENGINE_CFLAGS_$(FUZZ_ENGINE)) \
	-I$(srcdir)/tests/fuzz -I$(srcdir)/lib -I$(srcdir)/fcgi -I$(srcdir)/healthd \
	$(JSONC_CFLAGS) $(LIBCONFIG_CFLAGS) $(CURL_CFLAGS) $(SQLITE_CFLAGS) $(CRYPTO_CFLAGS)
FUZZ_LIBS = $(JSONC_LIBS) $(LIBCONFIG_LIBS) $(CRYPTO_LIBS) -lm -lpthread
# The pure modules the harnesses reach (fuzz_guard.c includes fcgi/guard.c itself).
FUZZ_PURE = lib/buf lib/arena lib/util lib/log lib/conf lib/settings lib/json_parse lib/state_url \
	fcgi/errors fcgi/sse fcgi/usage fcgi/usage_scan fcgi/pathcheck fcgi/anthropic fcgi/anthropic_stream \
	fcgi/messages fcgi/messages_stream fcgi/xlate fcgi/dialect fcgi/screen_text \
	healthd/metrics healthd/dcgm
FUZZ_LIB = $(FUZZ_DIR)/libfuzzpure.a
FUZZ_BINS = $(patsubst %,$(FUZZ_DIR)/fuzz_%,$(FUZZ_TARGETS))
# Every header may matter to every object; a fuzz rebuild takes seconds.
FUZZ_DEPS = $(wildcard $(srcdir)/lib/*.h $(srcdir)/fcgi/*.h $(srcdir)/fcgi/*.def \
	$(srcdir)/healthd/*.h $(srcdir)/tests/fuzz/*.h)

$(FUZZ_DIR)/%.o: $(srcdir)/%.c $(FUZZ_DEPS)
	@$(MKDIR_P) $(@D)
	$(AM_V_CC)$(FUZZ_CC) $(FUZZ_CFLAGS) -c -o $@ $<
$(FUZZ_DIR)/tests/fuzz/fuzz_guard.o: $(srcdir)/fcgi/guard.c
$(FUZZ_LIB): $(patsubst %,$(FUZZ_DIR)/%.o,$(FUZZ_PURE))
	$(AM_V_AR)rm -f $@ && $(AR) $(ARFLAGS) $@ $^ && $(RANLIB) $@
$(FUZZ_DIR)/fuzz_%: $(FUZZ_DIR)/tests/fuzz/fuzz_%.o $(FUZZ_LIB) $(FUZZ_ENGINE_OBJS_$(FUZZ_ENGINE))
	$(AM_V_CCLD)$(FUZZ_CC) $(FUZZ_CFLAGS) $(FUZZ_ENGINE_LDFLAGS_$(FUZZ_ENGINE)) -o $@ $< \
	  $(FUZZ_ENGINE_OBJS_$(FUZZ_ENGINE)) $(FUZZ_LIB) $(FUZZ_LIBS)

# Keep the harness objects make would otherwise delete as intermediates.
.SECONDARY: $(patsubst %,$(FUZZ_DIR)/tests/fuzz/fuzz_%.o,$(FUZZ_TARGETS)) $(FUZZ_ENGINE_OBJS_$(FUZZ_ENGINE))
fuzz-build: $(FUZZ_BINS)
fuzz: fuzz-build
	$(SHELL) $(srcdir)/tests/fuzz/run fuzz $(FUZZ_ENGINE) $(FUZZ_DIR) $(srcdir)/tests/fuzz/corpus \
	  $(FUZZ_SECONDS) $(FUZZ_TARGETS)
fuzz-replay: fuzz-build
	$(SHELL) $(srcdir)/tests/fuzz/run replay $(FUZZ_ENGINE) $(FUZZ_DIR) $(srcdir)/tests/fuzz/corpus \
	  0 $(FUZZ_TARGETS)
fuzz-clean:
	-rm -rf tests/fuzz/build-libfuzzer tests/fuzz/build-standalone
.PHONY: fuzz fuzz-build fuzz-replay fuzz-clean

EXTRA_DIST += tests/fuzz/fuzz.mk tests/fuzz/run tests/fuzz/fuzz.h tests/fuzz/standalone.c \
	$(wildcard tests/fuzz/fuzz_*.c) $(wildcard tests/fuzz/corpus/*/*)
