/*
 * check_json.c -- the profiles' JSON form (http_json.c) on profiles the
 * builder makes here, judged by jansson, a real JSON parser: frame names
 * and label values that are not text a page could trust (markup, quotes,
 * control bytes, bytes that are not UTF-8) come out as JSON strings that
 * parse and decode to the same text, or U+FFFD for each byte that is not
 * UTF-8; samples come in root-first order; with proto=1 the base64 is the
 * .pb.gz itself; input that is not a profile is -EINVAL, never a crash.
 * The CPU, heap and goroutine endpoints' JSON are checked against
 * google/pprof's parser by test/http_json.sh.
 */
#define _GNU_SOURCE
#include "builder.h"
#include "symbolize_profile.h"
#include "http.h"

#include <check.h>
#include <cpprof.h>
#include <errno.h>
#include <jansson.h>
#include <stdlib.h>
#include <string.h>

/* A profile of one sample type whose samples are pseudo-frames: frames[i]
 * with value i + 1, labelled tenant=tenants[i] (NULL: none). */
static void make_profile(const char *const *frames, const char *const *tenants,
                         size_t n, unsigned char **gz, size_t *len)
{
    builder *b = builder_new();
    ck_assert_ptr_nonnull(b);
    ck_assert_int_eq(builder_add_sample_type(b, "samples", "count"), 0);
    for (size_t i = 0; i < n; i++) {
        cpprof_labelset *set = NULL;
        if (tenants && tenants[i]) {
            const char *kv[] = {"tenant", tenants[i]};
            ck_assert_int_eq(cpprof_labels(&set, 2, kv), 0);
        }
        int64_t v = (int64_t)i + 1;
        ck_assert_int_eq(builder_add_labelled_pseudo_sample(b, frames[i], &v,
                                                            set),
                         0);
        cpprof_labelset_release(set);
    }
    ck_assert_int_eq(symbolize_profile(b), 0);
    ck_assert_int_eq(builder_encode(b, gz, len), 0);
    builder_free(b);
}

static json_t *to_json(const unsigned char *gz, size_t len, bool labelled,
                       bool proto, char **text)
{
    size_t text_len;
    ck_assert_int_eq(http_profile_json(gz, len, labelled, proto, text,
                                       &text_len),
                     0);
    ck_assert_uint_eq(strlen(*text), text_len);
    json_error_t err;
    json_t *root = json_loads(*text, 0, &err);
    ck_assert_msg(root != NULL, "jansson: %s at %d: %.200s", err.text,
                  err.position, *text);
    return root;
}

/* The function name of sample i's only frame. */
static const char *frame_of(json_t *root, size_t i)
{
    json_t *s = json_array_get(json_object_get(root, "samples"), i);
    json_t *stack = json_object_get(s, "stack");
    ck_assert_uint_eq(json_array_size(stack), 1);
    json_t *frame = json_array_get(
        json_object_get(root, "frames"),
        (size_t)json_integer_value(json_array_get(stack, 0)));
    return json_string_value(json_object_get(frame, "function"));
}

START_TEST(text_is_escaped_and_decodes_to_itself)
{
    static const char *const frames[] = {
        "a<b>&c</script>", "quote\"back\\slash", "ctl\x01\x1f\x7f",
        "caf\xc3\xa9 \xe2\x82\xac",   /* valid UTF-8 stays as it is */
        "bad\xff\xfe",                 /* two stray bytes */
        "surrogate\xed\xa0\x80",       /* not UTF-8: three bytes */
        "cut\xe2\x82",                 /* a sequence cut short */
    };
    static const char *const want[] = {
        "a<b>&c</script>", "quote\"back\\slash", "ctl\x01\x1f\x7f",
        "caf\xc3\xa9 \xe2\x82\xac",
        "bad\xef\xbf\xbd\xef\xbf\xbd",
        "surrogate\xef\xbf\xbd\xef\xbf\xbd\xef\xbf\xbd",
        "cut\xef\xbf\xbd\xef\xbf\xbd",
    };
    static const char *const tenants[] = {"<script>alert(1)</script>", NULL,
                                          NULL, NULL, NULL, NULL, NULL};
    size_t n = sizeof frames / sizeof *frames;
    unsigned char *gz;
    size_t len;
    char *text;
    make_profile(frames, tenants, n, &gz, &len);
    json_t *root = to_json(gz, len, true, false, &text);
    /* Markup never appears as itself in the text. */
    ck_assert_ptr_null(strpbrk(text, "<>&"));
    ck_assert_ptr_nonnull(strstr(text, "\\u003cscript\\u003e"));
    json_t *samples = json_object_get(root, "samples");
    ck_assert_uint_eq(json_array_size(samples), n);
    for (size_t i = 0; i < n; i++) {
        /* Find the sample of value i + 1: the order is the stacks'. */
        size_t j = 0;
        while (j < n && json_integer_value(json_array_get(json_object_get(
                            json_array_get(samples, j), "values"), 0)) !=
                            (json_int_t)i + 1)
            j++;
        ck_assert_uint_lt(j, n);
        ck_assert_str_eq(frame_of(root, j), want[i]);
        json_t *labels = json_object_get(json_array_get(samples, j), "labels");
        if (tenants[i])
            ck_assert_str_eq(json_string_value(json_object_get(labels,
                                                               "tenant")),
                             tenants[i]);
        else
            ck_assert_ptr_null(labels);
    }
    ck_assert(json_is_true(json_object_get(root, "labelled")));
    json_decref(root);
    free(text);
    free(gz);
}
END_TEST

static __attribute__((noinline, noclone)) int callee_x(int v)
{
    return v * 3 + 1;
}

static __attribute__((noinline, noclone)) int callee_y(int v)
{
    return v * 5 + 2;
}

/* Two samples, x called from y, then y from x: frame x is interned first,
 * so the second sample's stack is the first read from the root. */
START_TEST(samples_come_root_first)
{
    uintptr_t x = (uintptr_t)&callee_x + 4, y = (uintptr_t)&callee_y + 4;
    /* A caller's PC is looked up one byte back: x + 1 is x's location. */
    const uintptr_t first[] = {x, y + 1}, second[] = {y, x + 1};
    builder *b = builder_new();
    ck_assert_ptr_nonnull(b);
    ck_assert_int_eq(builder_add_sample_type(b, "samples", "count"), 0);
    int64_t one = 1, two = 2;
    ck_assert_int_eq(builder_add_sample(b, first, 2, STACK_LEAF_EXACT, &one,
                                        NULL, NULL, 0),
                     0);
    ck_assert_int_eq(builder_add_sample(b, second, 2, STACK_LEAF_EXACT, &two,
                                        NULL, NULL, 0),
                     0);
    unsigned char *gz;
    size_t len;
    char *text;
    ck_assert_int_eq(symbolize_profile(b), 0);
    ck_assert_int_eq(builder_encode(b, &gz, &len), 0);
    builder_free(b);
    json_t *root = to_json(gz, len, false, false, &text);
    json_t *samples = json_object_get(root, "samples");
    ck_assert_uint_eq(json_array_size(samples), 2);
    json_t *s0 = json_array_get(samples, 0);
    ck_assert_int_eq(json_integer_value(json_array_get(
                         json_object_get(s0, "values"), 0)),
                     2);
    json_t *stack = json_object_get(s0, "stack");
    size_t depth = json_array_size(stack);
    ck_assert_uint_ge(depth, 2);
    /* Its root frame is x's, the first frame interned. */
    ck_assert_int_eq(json_integer_value(json_array_get(stack, depth - 1)), 0);
    ck_assert(json_is_false(json_object_get(root, "labelled")));
    json_decref(root);
    free(text);
    free(gz);
}
END_TEST

static int base64_value(char c)
{
    static const char digits[] =
        "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/";
    const char *p = c ? strchr(digits, c) : NULL;
    return p ? (int)(p - digits) : -1;
}

START_TEST(proto_is_the_profile_itself)
{
    static const char *const frames[] = {"one", "two"};
    unsigned char *gz;
    size_t len;
    char *text;
    make_profile(frames, NULL, 2, &gz, &len);
    json_t *root = to_json(gz, len, false, true, &text);
    const char *b64 = json_string_value(json_object_get(root, "proto"));
    ck_assert_ptr_nonnull(b64);
    ck_assert_uint_eq(strlen(b64), (len + 2) / 3 * 4);
    unsigned char *back = malloc(len + 3);
    size_t n = 0;
    for (size_t i = 0; b64[i]; i += 4) {
        int v[4];
        for (int k = 0; k < 4; k++)
            v[k] = b64[i + k] == '=' ? 0 : base64_value(b64[i + k]);
        ck_assert(v[0] >= 0 && v[1] >= 0 && v[2] >= 0 && v[3] >= 0);
        uint32_t w = (uint32_t)(v[0] << 18 | v[1] << 12 | v[2] << 6 | v[3]);
        back[n++] = (unsigned char)(w >> 16);
        if (b64[i + 2] != '=')
            back[n++] = (unsigned char)(w >> 8);
        if (b64[i + 3] != '=')
            back[n++] = (unsigned char)w;
    }
    ck_assert_uint_eq(n, len);
    ck_assert_mem_eq(back, gz, len);
    free(back);
    json_decref(root);
    free(text);
    free(gz);
}
END_TEST

START_TEST(what_is_not_a_profile_is_refused)
{
    static const char *const frames[] = {"one"};
    unsigned char *gz;
    size_t len;
    char *text = NULL;
    size_t text_len;
    make_profile(frames, NULL, 1, &gz, &len);
    /* Cut short, and not gzip at all. */
    ck_assert_int_eq(http_profile_json(gz, len / 2, false, false, &text,
                                       &text_len),
                     -EINVAL);
    static const unsigned char junk[] = "not a profile";
    ck_assert_int_eq(http_profile_json(junk, sizeof junk, false, false, &text,
                                       &text_len),
                     -EINVAL);
    ck_assert_ptr_null(text);
    free(gz);
}
END_TEST

int main(void)
{
    Suite *s = suite_create("json");
    TCase *tc = tcase_create("json");
    tcase_add_test(tc, text_is_escaped_and_decodes_to_itself);
    tcase_add_test(tc, samples_come_root_first);
    tcase_add_test(tc, proto_is_the_profile_itself);
    tcase_add_test(tc, what_is_not_a_profile_is_refused);
    suite_add_tcase(s, tc);
    SRunner *sr = srunner_create(s);
    srunner_run_all(sr, CK_NORMAL);
    int failed = srunner_ntests_failed(sr);
    srunner_free(sr);
    return failed ? 1 : 0;
}
