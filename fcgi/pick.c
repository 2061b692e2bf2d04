/* pick.c: priority groups, weighted choice and standby routes (R-RT-1..4). */
#include "pick.h"

int pick_weighted(const int *weights, int n, uint64_t rnd)
{
    uint64_t total = 0;
    for (int i = 0; i < n; i++)
        if (weights[i] > 0)
            total += (uint64_t)weights[i];
    if (total == 0)
        return -1;
    uint64_t x = rnd % total;
    for (int i = 0; i < n; i++) {
        if (weights[i] <= 0)
            continue;
        if (x < (uint64_t)weights[i])
            return i;
        x -= (uint64_t)weights[i];
    }
    return -1;
}

int pick_route(const struct pick_route *routes, int n, uint64_t rnd)
{
    int g = 0;
    while (g < n) {
        int end = g;
        while (end < n && routes[end].priority == routes[g].priority)
            end++;
        /* R-RT-2: weighted random over the group's available weighted routes;
         * unavailable ones count as weight 0, which is R-RT-3's "next route". */
        uint64_t total = 0;
        for (int i = g; i < end; i++)
            if (routes[i].available && routes[i].weight > 0)
                total += (uint64_t)routes[i].weight;
        if (total > 0) {
            uint64_t x = rnd % total;
            for (int i = g; i < end; i++) {
                if (!routes[i].available || routes[i].weight <= 0)
                    continue;
                if (x < (uint64_t)routes[i].weight)
                    return i;
                x -= (uint64_t)routes[i].weight;
            }
        }
        /* R-RT-4: standby routes only when no weighted route of the group can serve. */
        for (int i = g; i < end; i++)
            if (routes[i].available && routes[i].weight == 0)
                return i;
        g = end;
    }
    return -1;
}
