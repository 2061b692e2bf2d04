/* ops_internal.h: validation, statement and JSON helpers shared by admin/ops_*.c.
 * Not part of the ops API; only the ops files include it. */
#ifndef SLUICE_OPS_INTERNAL_H
#define SLUICE_OPS_INTERNAL_H

#include "ops.h"
#include "settings.h"

#include <json-c/json.h>
#include "sdb.h"
#include <stdint.h>

#define OPS_NAME_MAX 128        /* names of tenants, users, endpoints, models, settings */
#define OPS_URL_MAX 2048
#define OPS_VALUE_MAX 65536     /* a setting's value */
#define OPS_COUNT_MAX 1000000   /* weights, concurrency */

/* ---- errors -------------------------------------------------------------- */
void ops_fail(struct ops_error *err, enum ops_error_kind kind, const char *param,
              const char *fmt, ...) __attribute__((format(printf, 4, 5)));
/* From the last SQLite error: UNIQUE -> CONFLICT, CHECK -> INVALID, else INTERNAL. */
void ops_fail_db(struct ops_error *err, struct sdb *db);

/* ---- validation (R-SEC-2); 0 or -1 with err set ---------------------------- */
/* 1..max bytes of valid UTF-8 without control characters. */
int ops_check_text(const char *param, const char *s, size_t max, struct ops_error *err);
int ops_check_name(const char *param, const char *s, struct ops_error *err);
/* s must be one of the NULL-terminated list. */
int ops_check_enum(const char *param, const char *s, const char *const *allowed,
                   struct ops_error *err);
/* An unset value passes. */
int ops_check_range(const char *param, struct ops_i64 v, int64_t min, int64_t max,
                    struct ops_error *err);

/* R-KEY-1 limits: each unset or 0..10^12 (ops_key.c). */
int ops_key_check_limits(const struct ops_key_limits *l, struct ops_error *err);

/* ---- statements ------------------------------------------------------------
 * Parameters are bound from `types`, one letter per ?N in order:
 *   't' const char *      (NULL binds NULL)
 *   'i' int64_t
 *   'o' struct ops_i64    (unset binds NULL)
 * Pass int64_t exactly for 'i' (cast literals). */
struct sdb_stmt *ops_prepare(struct sdb *db, struct ops_error *err, const char *sql,
                          const char *types, ...);
/* Runs to completion. 0 or -1. */
int ops_run(struct sdb *db, struct ops_error *err, const char *sql, const char *types, ...);
/* First column of the first row as a number: 1 found, 0 no row, -1 error. */
int ops_query_i64(struct sdb *db, struct ops_error *err, int64_t *out, const char *sql,
                  const char *types, ...);

/* Builds one entity from the current row. */
typedef struct json_object *(*ops_row_fn)(struct sdb_stmt *st);
/* The single row as an entity; NOT_FOUND "<what> not found" when there is none. */
struct json_object *ops_query_one(struct sdb *db, struct ops_error *err, ops_row_fn row,
                                  const char *what, const char *sql, const char *types, ...);
/* {"<field>":[entity...]} */
struct json_object *ops_query_list(struct sdb *db, struct ops_error *err, const char *field,
                                   ops_row_fn row, const char *sql, const char *types, ...);

/* One page of a listing: sql selects the rows (ORDER BY included, no LIMIT);
 * the page adds LIMIT/OFFSET as the next two parameters. Returns
 * {"<field>":[...],"total":N,"limit":L,"offset":O}. */
struct json_object *ops_query_page(struct sdb *db, struct ops_error *err, const char *field,
                                   ops_row_fn row, const struct ops_list *l, const char *sql,
                                   const char *types, ...);

/* ---- audit (R-ADM-5), inside the caller's transaction ------------------------------
 * object_type "tenant", "user", ...; before/after are entities (NULL for none, not
 * consumed). Fields that may hold a secret ("key", "password", "upstream_auth",
 * "token", "csrf_token", "key_hash", "password_hash") are never written. The object id
 * and tenant come from after (else before): "id" and "tenant_id" members. */
/* Writes res as the audit record of a change; on failure frees res and returns NULL,
 * so an operation's result is never returned without its record (R-ADM-5). */
struct json_object *ops_audited(struct sdb *db, struct ops_error *err, const char *action, const char *object_type,
                                struct json_object *before, struct json_object *res);
int ops_audit(struct sdb *db, struct ops_error *err, const char *action, const char *object_type,
              struct json_object *before, struct json_object *after);
/* Deletes the row of table whose id is res's "id" (in the caller's transaction) and audits
 * it as object_type; res, or NULL (res freed) when either fails. table is a constant. */
struct json_object *ops_deleted(struct sdb *db, struct ops_error *err, const char *table, const char *object_type,
                                struct json_object *res);

/* ---- transactions ---------------------------------------------------------- */
int ops_begin(struct sdb *db, struct ops_error *err);   /* BEGIN IMMEDIATE */
/* Commits when res is non-NULL and returns it; otherwise (or if COMMIT fails)
 * rolls back, frees res and returns NULL. */
struct json_object *ops_finish(struct sdb *db, struct json_object *res, struct ops_error *err);

/* ---- who acts (ops_audit.c; see ops_set_actor_rights) ---------------------------- */
enum authz_role ops_actor_role(void);
/* The actor's key ceiling, the bound of the users it creates or changes; NULL for the operator. */
const struct authz_limits *ops_actor_bound(void);
/* 0, or -1 with FORBIDDEN when no caller has been established (AUTHZ_NOBODY). */
int ops_actor_check(struct ops_error *err);
/* R-KEY-1 limits as authz sees them: set members with their values, unset ones 0. */
void ops_limits_authz(const struct ops_key_limits *l, struct authz_limits *out);

/* ---- the credential at rest (R-SEC-9, ops_endpoint.c) -------------------------- */
/* Inside the caller's transaction: creates the key file when missing (its path into
 * key_path) and seals every clear upstream_auth (a row written before sealing existed),
 * with an audit row "seal" each; how many into *sealed. 0, or -1 with err set. */
int ops_endpoint_seal_all(struct sdb *db, char *key_path, size_t cap, int64_t *sealed, struct ops_error *err);

/* ---- lookups by name (NOT_FOUND when missing) -------------------------------- */
int ops_tenant_id(struct sdb *db, const char *name, int64_t *id, struct ops_error *err);
int ops_endpoint_ids(struct sdb *db, const char *name, int64_t *id, int64_t *tenant_id,
                     struct ops_error *err);
int ops_user_ids(struct sdb *db, const char *name, int64_t *id, int64_t *tenant_id,
                 struct ops_error *err);

/* ---- JSON from columns ------------------------------------------------------- */
void ops_json_text(struct json_object *o, const char *key, struct sdb_stmt *st, int col);
void ops_json_int(struct json_object *o, const char *key, struct sdb_stmt *st, int col);
void ops_json_bool(struct json_object *o, const char *key, struct sdb_stmt *st, int col);
void ops_json_str(struct json_object *o, const char *key, const char *s); /* NULL -> null */
/* A REAL column rounded to decimals places and written that way (71.3, not 71.299999...). */
void ops_json_real(struct json_object *o, const char *key, struct sdb_stmt *st, int col, int decimals);

/* ---- settings ---------------------------------------------------------------- */
/* The setting's value as the data plane reads it (stored, or its default); a text or enum
 * word is copied into text[n], which v->text then points at. name must be a setting. */
void ops_setting(struct sdb *db, const char *name, struct settings_value *v, char *text, size_t n);

#endif
