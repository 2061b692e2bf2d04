/* upstream.h: the one set of libcurl options every upstream transfer of sluice uses
 * (R-SEC-3): http/https only, no redirects, no proxy from the environment, no signals. */
#ifndef SLUICE_UPSTREAM_H
#define SLUICE_UPSTREAM_H

#include <curl/curl.h>

/* Sets the safety options on an easy handle (call after curl_easy_reset too). */
void upstream_safe_defaults(CURL *c);

#endif
