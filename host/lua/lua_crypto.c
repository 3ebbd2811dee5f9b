/* lua_crypto.c — see lua_crypto.h. */
#include "lua/lua_crypto.h"

#include <lauxlib.h>
#include <openssl/evp.h>

#include "lua/lua_util.h"

static int luna_lua_crypto_sha256(lua_State *L)
{
    size_t len;
    const char *s = luaL_checklstring(L, 1, &len);
    unsigned char md[EVP_MAX_MD_SIZE];
    unsigned int mdlen = 0;
    if (!EVP_Digest(s, len, md, &mdlen, EVP_sha256(), NULL))
        return luaL_error(L, "sha256 failed");
    static const char hex[] = "0123456789abcdef";
    char out[2 * EVP_MAX_MD_SIZE];
    for (unsigned int i = 0; i < mdlen; i++) {
        out[2 * i] = hex[md[i] >> 4];
        out[2 * i + 1] = hex[md[i] & 15];
    }
    lua_pushlstring(L, out, 2 * mdlen);
    return 1;
}

void luna_lua_crypto_register(lua_State *L)
{
    static const luaL_Reg funcs[] = { { "sha256", luna_lua_crypto_sha256 }, { NULL, NULL } };
    luna_lua_register_table(L, "crypto", funcs);
}
