/*
 * redact.h — credentials masked in place (redact.c): what no bundle or
 * ring may hold.
 */
#ifndef GMP_REDACT_H
#define GMP_REDACT_H

#include "gpumemprof.h"
#include "util.h"

#include <stddef.h>

/* A command line (NUL-separated arguments): the values of secret-looking
 * options ("--api-token=X", "--password X", "DB_PASSWORD=X", mysql's
 * "-pX") and the credentials gmp_redact_text finds masked with '*' in
 * place, so no bundle or ring holds them. */
GMP_HIDDEN void gmp_redact_args(char *args, size_t len);

/* Credentials inside free text (len bytes, NULs allowed), masked with '*'
 * in place: a URL's userinfo (https://user:pass@host), the value of an
 * Authorization or Cookie header. */
GMP_HIDDEN void gmp_redact_text(char *s, size_t len);

/* Is the environment variable name one whose value must never be written? */
GMP_HIDDEN int gmp_env_name_is_secret(const char *name, size_t len);

#endif
