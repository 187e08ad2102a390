/*
 * result_read.h — reading back a result file that `burstsim sim --out` or `search --out` wrote,
 * for the commands that compare or translate its points (diff, export). A file that is missing,
 * not JSON, or not a burstsim result (no "results" array of objects) is refused with a message
 * naming the file; a setting or figure is read by its dotted path (result_fields.h).
 */
#ifndef BURSTSIM_RESULT_READ_H
#define BURSTSIM_RESULT_READ_H

#include <stddef.h>

struct cJSON;

/* The parsed document (the caller deletes it with cJSON_Delete), *results its "results" array
 * and *n its length; NULL with "PATH: why" in err. */
struct cJSON *bs_result_file_load(const char *path, struct cJSON **results, int *n, char *err, size_t errlen);

/* The item at a dotted path ("time_s.step") inside o, or NULL. */
const struct cJSON *bs_result_item(const struct cJSON *o, const char *path);

/* A setting's value as text: a string as is, a number as an integer when whole (else %.17g),
 * true/false, "" when absent or null. */
void bs_result_text(const struct cJSON *o, const char *path, char *dst, size_t n);

/* A figure: 1 and *v when it is a number, 0 when absent or null. */
int bs_result_number(const struct cJSON *o, const char *path, double *v);

#endif
