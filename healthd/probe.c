/* probe.c: run one round's HTTP requests in parallel with curl multi (R-HC-1, R-LB-2: at most N scrapes at once). */
#include "healthd.h"
#include "upstream.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static size_t probe_write(char *p, size_t size, size_t n, void *arg)
{
    struct probe_job *j = arg;
    size_t len = size * n;
    if (!j->keep_body)
        return len;
    if (j->resp_len + len > PROBE_BODY_MAX)
        return 0;                       /* over the cap: the transfer fails, the body is not used */
    if (j->resp_len + len + 1 > j->cap) {
        size_t cap = j->cap ? j->cap : 16384;
        while (cap < j->resp_len + len + 1)
            cap *= 2;
        j->resp = xrealloc(j->resp, cap);
        j->cap = cap;
    }
    memcpy(j->resp + j->resp_len, p, len);
    j->resp_len += len;
    j->resp[j->resp_len] = '\0';
    return len;
}

static void probe_start(CURLM *m, struct probe_job *j, long timeout_ms, long connect_ms)
{
    CURL *c = curl_easy_init();
    if (!c)
        abort();
    j->easy = c;
    j->started = 1;
    upstream_safe_defaults(c);
    curl_easy_setopt(c, CURLOPT_URL, j->url);
    curl_easy_setopt(c, CURLOPT_TIMEOUT_MS, timeout_ms);
    curl_easy_setopt(c, CURLOPT_CONNECTTIMEOUT_MS, connect_ms < timeout_ms ? connect_ms : timeout_ms);
    curl_easy_setopt(c, CURLOPT_WRITEFUNCTION, probe_write);
    curl_easy_setopt(c, CURLOPT_WRITEDATA, j);
    curl_easy_setopt(c, CURLOPT_PRIVATE, j);
    curl_easy_setopt(c, CURLOPT_USERAGENT, "sluice-healthd");
    if (j->headers)
        curl_easy_setopt(c, CURLOPT_HTTPHEADER, j->headers);
    if (j->body) {
        curl_easy_setopt(c, CURLOPT_POSTFIELDS, j->body);
        curl_easy_setopt(c, CURLOPT_POSTFIELDSIZE, (long)strlen(j->body));
    }
    curl_multi_add_handle(m, c);
}

void probe_run(struct probe_job *jobs, int n, const int limits[PROBE_CLASSES], long timeout_ms,
               long connect_ms)
{
    CURLM *m = curl_multi_init();
    if (!m)
        abort();
    int running_by_class[PROBE_CLASSES] = {0};
    int next = 0, active = 0, done = 0;
    for (int i = 0; i < n; i++) {
        jobs[i].status = 0;
        jobs[i].error[0] = '\0';
        jobs[i].started = 0;
    }
    while (done < n) {
        /* Admit every job whose class has room, in order. */
        for (int i = next; i < n; i++) {
            struct probe_job *j = &jobs[i];
            int cls = j->cls >= 0 && j->cls < PROBE_CLASSES ? j->cls : 0;
            if (j->started || (limits[cls] > 0 && running_by_class[cls] >= limits[cls]))
                continue;
            probe_start(m, j, timeout_ms, connect_ms);
            running_by_class[cls]++;
            active++;
        }
        while (next < n && jobs[next].started)
            next++;
        int still;
        curl_multi_perform(m, &still);
        CURLMsg *msg;
        int left;
        while ((msg = curl_multi_info_read(m, &left))) {
            if (msg->msg != CURLMSG_DONE)
                continue;
            struct probe_job *j = NULL;
            curl_easy_getinfo(msg->easy_handle, CURLINFO_PRIVATE, (char **)&j);
            if (msg->data.result == CURLE_OK)
                curl_easy_getinfo(msg->easy_handle, CURLINFO_RESPONSE_CODE, &j->status);
            else
                snprintf(j->error, sizeof j->error, "%s", curl_easy_strerror(msg->data.result));
            curl_multi_remove_handle(m, msg->easy_handle);
            curl_easy_cleanup(msg->easy_handle);
            j->easy = NULL;
            int cls = j->cls >= 0 && j->cls < PROBE_CLASSES ? j->cls : 0;
            running_by_class[cls]--;
            active--;
            done++;
        }
        if (done < n && active > 0)
            curl_multi_poll(m, NULL, 0, 100, NULL);
    }
    curl_multi_cleanup(m);
}

void probe_free(struct probe_job *jobs, int n)
{
    for (int i = 0; i < n; i++) {
        free(jobs[i].resp);
        jobs[i].resp = NULL;
        jobs[i].resp_len = jobs[i].cap = 0;
        curl_slist_free_all(jobs[i].headers);
        jobs[i].headers = NULL;
    }
}
