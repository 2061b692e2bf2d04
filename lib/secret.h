/* secret.h: upstream credentials at rest (R-SEC-9): AES-256-GCM under a key kept in a
 * file outside the database, so a copy of the database alone reveals no credential.
 *
 * Stored form of a sealed value (endpoints.upstream_auth):
 *
 *     "enc1:" base64( nonce[12] | ciphertext[n] | tag[16] )
 *
 * standard base64 with padding; n is the clear value's length; the additional
 * authenticated data is "endpoint:<id>" (secret_aad_endpoint), so a value copied onto
 * another row does not open. A value without the "enc1:" prefix is a legacy clear value
 * (written before sealing existed): it opens as itself until `sluicectl init` seals it.
 *
 * The key file holds 32 random bytes, raw or as 64 hex characters (a trailing newline
 * allowed); the file this module creates is hex, mode 0600. Every clear value and key
 * this module hands out is wiped before it is freed (secret_free, secret_key_wipe). */
#ifndef SLUICE_SECRET_H
#define SLUICE_SECRET_H

#include <stddef.h>
#include <stdint.h>

#define SECRET_KEY_BYTES 32
#define SECRET_PREFIX "enc1:"
#define SECRET_PLAIN_MAX 65536     /* longest value sealed or opened */
#define SECRET_AAD_MAX 32
#define SECRET_KEY_FILE_NAME "sluice.key"

struct secret_key {
    unsigned char bytes[SECRET_KEY_BYTES];
};

enum secret_result {
    SECRET_OK = 0,
    SECRET_NO_KEY,                 /* a sealed value and no key to open it with */
    SECRET_BAD,                    /* malformed, another key's, another row's, or tampered with */
};

/* ---- values (pure but for the random nonce) ---- */

/* "endpoint:<id>": the additional data of an endpoint's upstream_auth. */
void secret_aad_endpoint(int64_t id, char out[SECRET_AAD_MAX]);
/* 1 if stored has the "enc1:" prefix (sealed), 0 if it is a clear value. */
int secret_is_sealed(const char *stored);
/* plain -> stored form, a heap string; NULL if plain is longer than SECRET_PLAIN_MAX.
 * aad may be NULL (none). */
char *secret_seal(const struct secret_key *key, const char *plain, const char *aad);
/* stored -> *plain (heap, free with secret_free). A clear value is returned as it is (key
 * may be NULL then). *plain is NULL unless SECRET_OK. */
enum secret_result secret_open(const struct secret_key *key, const char *stored, const char *aad,
                               char **plain);
/* Wipes and frees a clear value (NULL is fine). */
void secret_free(char *plain);
void secret_key_wipe(struct secret_key *key);

/* ---- key files ---- */

/* The key from a file's contents: 32 raw bytes, or 64 hex characters and optional
 * trailing blanks. 0, or -1 if it is neither. */
int secret_key_parse(const unsigned char *data, size_t len, struct secret_key *key);
/* Reads a key file: 0, or -1 with errno (ENOENT: no such file, EINVAL: not a key). */
int secret_key_read(const char *path, struct secret_key *key);
/* Creates the key file with a new random key (O_CREAT|O_EXCL, mode 0600, written whole
 * before it appears under its name), or reads the one that is there: 1 created, 0 read,
 * -1 with errno. */
int secret_key_create(const char *path, struct secret_key *key);
/* The key file's path: key_file when it is set, else sluice.key in the directory of
 * database. 0, or -1 if it does not fit. */
int secret_key_path(const char *key_file, const char *database, char *out, size_t cap);

/* ---- the process's key (one database per process) ---- */

/* secrets.key_file, or sluicectl --key-file, for secret_process_key; NULL or "" (the
 * default) = sluice.key beside the database. Call once at start-up. */
void secret_use_key_file(const char *key_file);
/* The key for database (loaded once and kept for the process's life; the pointer stays
 * valid), creating the file when create is set and it is missing. NULL when there is
 * none (not created) or it cannot be read or made (logged). path, if not NULL, gets the
 * key file's path. Thread-safe. */
const struct secret_key *secret_process_key(const char *database, int create, char *path, size_t cap);
/* An endpoint's upstream_auth as stored -> its clear value (heap, secret_free), with the
 * process key. NULL for no credential (NULL or ""), and for one that cannot be opened:
 * that is logged, naming the endpoint and never the value, once per endpoint and process. */
char *secret_open_endpoint(const char *database, int64_t id, const char *name, const char *stored);

#endif
