/* test_affinity.c: the session key cascade, the overload rule and the table (R-AFF-1..4). */
#include "affinity.h"

#include "check.h"

#include <json-c/json.h>
#include <stdlib.h>

static struct json_object *J(const char *s) { return json_tokener_parse(s); }

static void test_cascade(void)
{
    static const struct {
        const char *name, *header, *body;
        int present[AFF_LEVELS];
    } cases[] = {
        {"header only", "sess-1", "{\"messages\":[]}", {1, 0, 0, 0, 0}},
        {"everything", "s", "{\"prompt_cache_key\":\"p\",\"user\":\"u\",\"messages\":[{\"role\":\"system\",\"content\":\"S\"},"
         "{\"role\":\"user\",\"content\":\"U\"},{\"role\":\"assistant\",\"content\":\"A\"},{\"role\":\"user\",\"content\":\"U2\"}]}",
         {1, 1, 1, 1, 1}},
        {"first turn: l1 only", NULL, "{\"messages\":[{\"role\":\"user\",\"content\":\"hi\"}]}", {0, 0, 0, 0, 1}},
        {"empty strings are absent", "", "{\"prompt_cache_key\":\"\",\"user\":\"\",\"messages\":[{\"role\":\"assistant\",\"content\":\"x\"}]}",
         {0, 0, 0, 0, 0}},
        {"text parts count as content", NULL, "{\"messages\":[{\"role\":\"user\",\"content\":[{\"type\":\"text\",\"text\":\"a\"}]}]}",
         {0, 0, 0, 0, 1}},
    };
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        struct json_object *b = J(cases[i].body);
        struct aff_keys k;
        aff_keys_build(&k, "1/2", cases[i].header, b, 4096);
        for (int l = 0; l < AFF_LEVELS; l++)
            CHECK(k.present[l] == cases[i].present[l], "%s: level %s present %d", cases[i].name, aff_level_names[l],
                  k.present[l]);
        json_object_put(b);
    }
}

static void test_turns_and_scope(void)
{
    /* R-AFF-1: turn 2 of the same conversation has turn 1's l1; turn 3 has turn 2's l2. */
    struct json_object *t1 = J("{\"messages\":[{\"role\":\"system\",\"content\":\"S\"},{\"role\":\"user\",\"content\":\"Q1\"}]}");
    struct json_object *t2 = J("{\"messages\":[{\"role\":\"system\",\"content\":\"S\"},{\"role\":\"user\",\"content\":\"Q1\"},"
                               "{\"role\":\"assistant\",\"content\":\"A1\"},{\"role\":\"user\",\"content\":\"Q2\"}]}");
    struct json_object *t3 = J("{\"messages\":[{\"role\":\"system\",\"content\":\"S\"},{\"role\":\"user\",\"content\":\"Q1\"},"
                               "{\"role\":\"assistant\",\"content\":\"A1\"},{\"role\":\"user\",\"content\":\"Q2\"},"
                               "{\"role\":\"assistant\",\"content\":\"A2\"},{\"role\":\"user\",\"content\":\"Q3\"}]}");
    struct aff_keys k1, k2, k3, other_tenant, other_q;
    aff_keys_build(&k1, "7/1", NULL, t1, 4096);
    aff_keys_build(&k2, "7/1", NULL, t2, 4096);
    aff_keys_build(&k3, "7/1", NULL, t3, 4096);
    aff_keys_build(&other_tenant, "7/2", NULL, t1, 4096);
    CHECK(memcmp(k1.hash[AFF_L1], k2.hash[AFF_L1], 32) == 0, "l1 equal across turns");
    CHECK(memcmp(k2.hash[AFF_L2], k3.hash[AFF_L2], 32) == 0, "l2 equal across turns 2 and 3");
    CHECK(memcmp(k1.hash[AFF_L1], other_tenant.hash[AFF_L1], 32) != 0, "R-AFF-2: scope separates tenants");
    struct json_object *q = J("{\"messages\":[{\"role\":\"system\",\"content\":\"S\"},{\"role\":\"user\",\"content\":\"Q9\"}]}");
    aff_keys_build(&other_q, "7/1", NULL, q, 4096);
    CHECK(memcmp(k1.hash[AFF_L1], other_q.hash[AFF_L1], 32) != 0, "another question, another l1");
    /* Header keys are scoped too: the same X-Session-Id in two tenants differs. */
    struct aff_keys h1, h2;
    aff_keys_build(&h1, "7/1", "abc", NULL, 4096);
    aff_keys_build(&h2, "7/2", "abc", NULL, 4096);
    CHECK(memcmp(h1.hash[AFF_HEADER], h2.hash[AFF_HEADER], 32) != 0, "client session ids scoped");
    /* Capped input: a longer header with the same first cap bytes maps the same. */
    aff_keys_build(&h1, "7/1", "abcdefXXXX", NULL, 6);
    aff_keys_build(&h2, "7/1", "abcdefYYYY", NULL, 6);
    CHECK(memcmp(h1.hash[AFF_HEADER], h2.hash[AFF_HEADER], 32) == 0, "input capped");
    json_object_put(t1);
    json_object_put(t2);
    json_object_put(t3);
    json_object_put(q);
}

/* Messages bodies: a top-level system, metadata.user_id as the user level, and
 * only cache_control-marked system blocks hashed when any are marked. */
static void test_messages_bodies(void)
{
    static const char *const bodies[] = {
        /* 0, 1: marked stable block, unmarked billing line that differs */
        "{\"system\":[{\"type\":\"text\",\"text\":\"billing 1\"},{\"type\":\"text\",\"text\":\"You are X\","
        "\"cache_control\":{\"type\":\"ephemeral\"}}],\"messages\":[{\"role\":\"user\",\"content\":\"hi\"}]}",
        "{\"system\":[{\"type\":\"text\",\"text\":\"billing 2\"},{\"type\":\"text\",\"text\":\"You are X\","
        "\"cache_control\":{\"type\":\"ephemeral\"}}],\"messages\":[{\"role\":\"user\",\"content\":\"hi\"}]}",
        /* 2, 3: nothing marked: the whole system counts */
        "{\"system\":[{\"type\":\"text\",\"text\":\"billing 1\"},{\"type\":\"text\",\"text\":\"You are X\"}],"
        "\"messages\":[{\"role\":\"user\",\"content\":\"hi\"}]}",
        "{\"system\":[{\"type\":\"text\",\"text\":\"billing 2\"},{\"type\":\"text\",\"text\":\"You are X\"}],"
        "\"messages\":[{\"role\":\"user\",\"content\":\"hi\"}]}",
        /* 4: a string system, and metadata.user_id */
        "{\"system\":\"You are X\",\"metadata\":{\"user_id\":\"u-1\"},\"messages\":[{\"role\":\"user\","
        "\"content\":[{\"type\":\"text\",\"text\":\"hi\"}]}]}",
        /* 5: another system */
        "{\"system\":\"You are Y\",\"messages\":[{\"role\":\"user\",\"content\":\"hi\"}]}",
    };
    struct aff_keys k[6];
    for (int i = 0; i < 6; i++) {
        struct json_object *b = json_tokener_parse(bodies[i]);
        CHECK(b != NULL, "body %d parses", i);
        aff_keys_build(&k[i], "3/1", NULL, b, 4096);
        CHECK(k[i].present[AFF_L1], "body %d has l1", i);
        json_object_put(b);
    }
    CHECK(memcmp(k[0].hash[AFF_L1], k[1].hash[AFF_L1], 32) == 0, "an unmarked billing block does not move it");
    CHECK(memcmp(k[2].hash[AFF_L1], k[3].hash[AFF_L1], 32) != 0, "unmarked: the whole system counts");
    CHECK(memcmp(k[4].hash[AFF_L1], k[5].hash[AFF_L1], 32) != 0, "the system is part of l1");
    CHECK(k[4].present[AFF_USER] && !k[5].present[AFF_USER], "metadata.user_id is the user level");
}

static void test_overload(void)
{
    /* R-AFF-3: both margins (ABS >= 4 AND REL >= 1.5). */
    static const struct { double s, m; int want; } cases[] = {
        {4, 0, 1}, {3, 0, 0}, {10, 6, 1}, {9, 6, 0} /* rel 1.5 holds, abs 3 does not */,
        {12, 8, 1}, {13, 9, 0} /* abs 4 holds, rel 1.44 does not */, {100, 96, 0}, {0, 0, 0}, {6, 2, 1},
    };
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++)
        CHECK(aff_overloaded(cases[i].s, cases[i].m, 4, 1.5) == cases[i].want, "L_sticky %g L_min %g", cases[i].s,
              cases[i].m);
}

static void test_table(void)
{
    enum { SLOTS = 256 };
    struct aff_entry *t = calloc(SLOTS, sizeof *t);
    unsigned char h[300][32];
    for (int i = 0; i < 300; i++) {
        memset(h[i], 0, 32);
        h[i][0] = (unsigned char)(i * 7);
        h[i][1] = (unsigned char)(i >> 3);
        h[i][31] = (unsigned char)i;
    }
    int64_t ttl = 1800000;
    aff_table_store(t, SLOTS, h[0], 11, 1000, ttl);
    CHECK_INT(aff_table_lookup(t, SLOTS, h[0], 2000, ttl), 11, "stored");
    CHECK_INT(aff_table_lookup(t, SLOTS, h[1], 2000, ttl), 0, "absent");
    aff_table_store(t, SLOTS, h[0], 12, 3000, ttl);
    CHECK_INT(aff_table_lookup(t, SLOTS, h[0], 3000, ttl), 12, "moved in place");
    /* Sliding TTL: each hit refreshes. */
    CHECK_INT(aff_table_lookup(t, SLOTS, h[0], 3000 + ttl - 1, ttl), 12, "just inside");
    CHECK_INT(aff_table_lookup(t, SLOTS, h[0], 3000 + 2 * ttl - 2, ttl), 12, "refreshed by the last hit");
    CHECK_INT(aff_table_lookup(t, SLOTS, h[0], 3000 + 4 * ttl, ttl), 0, "expired");
    /* Filling past the slots evicts the oldest; the newest are always kept. */
    for (int i = 1; i < 300; i++)
        aff_table_store(t, SLOTS, h[i], 100 + i, 10 * ttl + i, ttl);
    int kept = 0;
    for (int i = 250; i < 300; i++)
        kept += aff_table_lookup(t, SLOTS, h[i], 10 * ttl + 400, ttl) == 100 + i;
    CHECK_INT(kept, 50, "the 50 newest survive");
    free(t);
}

int main(void)
{
    test_messages_bodies();
    test_cascade();
    test_turns_and_scope();
    test_overload();
    test_table();
    return check_done();
}
