/* standalone.c: replay inputs through a harness without libFuzzer (any C compiler).
 *
 *   fuzz_<target> FILE|DIR...   runs LLVMFuzzerTestOneInput once on every file (a
 *                               directory: each regular file in it, sorted by name)
 *
 * Prints one "Running: FILE" line per input and "Executed N inputs" at the end; a
 * failed invariant or a sanitizer report ends the process with a non-zero status.
 * libFuzzer flags ("-runs=0", anything starting with '-') are ignored, so the same
 * command line works for either build. */
#include "fuzz.h"

#include <dirent.h>
#include <errno.h>
#include <sys/stat.h>

static int run_file(const char *path)
{
    FILE *f = fopen(path, "rb");
    if (!f) {
        fprintf(stderr, "%s: %s\n", path, strerror(errno));
        return -1;
    }
    size_t cap = 4096, len = 0;
    uint8_t *data = malloc(cap);
    if (!data)
        abort();
    size_t n;
    while ((n = fread(data + len, 1, cap - len, f)) > 0) {
        len += n;
        if (len == cap) {
            cap *= 2;
            data = realloc(data, cap);
            if (!data)
                abort();
        }
    }
    int err = ferror(f);
    fclose(f);
    if (err) {
        fprintf(stderr, "%s: read error\n", path);
        free(data);
        return -1;
    }
    printf("Running: %s (%zu bytes)\n", path, len);
    fflush(stdout);
    /* An exact-size copy, so reads past the end are caught as with libFuzzer. */
    uint8_t *exact = malloc(len ? len : 1);
    if (!exact)
        abort();
    memcpy(exact, data, len);
    free(data);
    LLVMFuzzerTestOneInput(exact, len);
    free(exact);
    return 0;
}

static int cmp_names(const void *a, const void *b)
{
    return strcmp(*(char *const *)a, *(char *const *)b);
}

static int run_dir(const char *dir, long *count)
{
    DIR *d = opendir(dir);
    if (!d) {
        fprintf(stderr, "%s: %s\n", dir, strerror(errno));
        return -1;
    }
    char **names = NULL;
    size_t n = 0, cap = 0;
    struct dirent *e;
    while ((e = readdir(d))) {
        if (e->d_name[0] == '.')
            continue;
        if (n == cap) {
            cap = cap ? cap * 2 : 64;
            names = realloc(names, cap * sizeof *names);
            if (!names)
                abort();
        }
        size_t l = strlen(dir) + strlen(e->d_name) + 2;
        names[n] = malloc(l);
        if (!names[n])
            abort();
        snprintf(names[n++], l, "%s/%s", dir, e->d_name);
    }
    closedir(d);
    if (n)
        qsort(names, n, sizeof *names, cmp_names);
    int rc = 0;
    for (size_t i = 0; i < n; i++) {
        struct stat st;
        if (stat(names[i], &st) == 0 && S_ISREG(st.st_mode)) {
            if (run_file(names[i]) != 0)
                rc = -1;
            else
                (*count)++;
        }
        free(names[i]);
    }
    free(names);
    return rc;
}

int main(int argc, char **argv)
{
    long count = 0;
    int rc = 0;
    for (int i = 1; i < argc; i++) {
        struct stat st;
        if (argv[i][0] == '-')
            continue;
        if (stat(argv[i], &st) != 0) {
            fprintf(stderr, "%s: %s\n", argv[i], strerror(errno));
            rc = 1;
        } else if (S_ISDIR(st.st_mode)) {
            if (run_dir(argv[i], &count) != 0)
                rc = 1;
        } else if (run_file(argv[i]) == 0) {
            count++;
        } else {
            rc = 1;
        }
    }
    printf("Executed %ld inputs\n", count);
    return rc;
}
