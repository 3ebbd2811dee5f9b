/*
 * kubeconfig.c — libFuzzer target for the YAML loaders: the kubeconfig
 * loader (client/kubeconfig, kubeconfig_yaml: parse, merge, context
 * selection, validation) and the dev server's YAML-to-JSON loader
 * (devserver/devserver_yaml, used for seeds and apply-patch+yaml bodies).
 *
 * Input: byte 0 options (bit 0 two files merged through KUBECONFIG
 * instead of one --kubeconfig file, bit 1 select --context "dev"), then
 * the first file, then optionally after a line `---8<---` the second.
 * The files are written to a private directory in /dev/shm (removed at
 * exit).  The whole text (both files) also goes to luna_ds_yaml_load.
 *
 * Never asks for credentials, so no exec plugin runs and no token file is
 * read.  Checked: a loaded config has a server and a namespace; an error
 * has a message; the YAML loader's result serialises.
 */
#include "fuzz_input.h"

#include <jansson.h>
#include <unistd.h>

#include "client/kubeconfig.h"
#include "devserver/devserver_yaml.h"

static char dir[64];
static char file_a[96], file_b[96], both[200];

static void cleanup(void)
{
    unlink(file_a);
    unlink(file_b);
    rmdir(dir);
}

static void write_file(const char *path, const uint8_t *data, size_t len)
{
    FILE *fp = fopen(path, "wb");
    if (!fp || (len && fwrite(data, 1, len, fp) != len) || fclose(fp) != 0)
        abort();
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    if (!dir[0]) {
        snprintf(dir, sizeof dir, "/dev/shm/luna-fuzz-kc-XXXXXX");
        if (!mkdtemp(dir))
            abort();
        snprintf(file_a, sizeof file_a, "%s/config", dir);
        snprintf(file_b, sizeof file_b, "%s/second", dir);
        snprintf(both, sizeof both, "%s:%s", file_a, file_b);
        atexit(cleanup);
    }
    fuzz_input in = { data, size };
    uint8_t flags = fuzz_byte(&in);
    const uint8_t *a, *b;
    size_t alen, blen;
    fuzz_split(&in, "\n---8<---\n", &a, &alen, &b, &blen);
    write_file(file_a, a, alen);
    write_file(file_b, b, blen);

    struct luna_kubeconfig_options o = {
        .path = (flags & 1) ? NULL : file_a,
        .kubeconfig_env = (flags & 1) ? both : NULL,
        .context = (flags & 2) ? "dev" : NULL,
        .home = "/nonexistent",
        .serviceaccount_dir = "/nonexistent",
    };
    struct luna_kubeconfig *cfg = NULL;
    luna_error err = { 0 };
    int rc = luna_kubeconfig_load(&o, &cfg, &err);
    if (rc < 0) {
        FUZZ_CHECK(cfg == NULL, "a failed load returned a config");
        FUZZ_CHECK(err.msg[0] != '\0', "error %d without a message", rc);
    } else {
        FUZZ_CHECK(cfg && cfg->server && cfg->namespace && cfg->source,
                   "loaded config without server, namespace or source");
        FUZZ_CHECK(luna_auth_kind_name(cfg->auth) != NULL, "unknown auth kind");
        luna_kubeconfig_free(cfg);
    }

    char *text = fuzz_cstr(in.p, in.n);
    luna_error yerr = { 0 };
    json_t *docs = luna_ds_yaml_load(text, in.n, &yerr);
    if (!docs) {
        FUZZ_CHECK(yerr.msg[0] != '\0', "YAML error without a message");
    } else {
        FUZZ_CHECK(json_is_array(docs), "YAML loader did not return an array");
        char *out = json_dumps(docs, JSON_COMPACT | JSON_ENCODE_ANY);
        FUZZ_CHECK(out != NULL, "YAML result does not serialise");
        free(out);
        json_decref(docs);
    }
    free(text);
    return 0;
}
