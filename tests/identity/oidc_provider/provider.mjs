// The OpenID Provider the identity tests sign in through: panva's oidc-provider (OpenID Certified) with its own
// development login and consent pages. Started by tests/identity/conftest.py; configured by environment:
//   PORT, CLIENT_ID, CLIENT_SECRET, REDIRECT_URIS (comma-separated), ACCOUNTS (JSON: login -> claims).
// The login typed on its page is the account id, hence the ID token's `sub`.
import Provider from "oidc-provider";

const port = Number(process.env.PORT);
const accounts = JSON.parse(process.env.ACCOUNTS || "{}");
const provider = new Provider(`http://127.0.0.1:${port}`, {
  clients: [
    {
      client_id: process.env.CLIENT_ID,
      client_secret: process.env.CLIENT_SECRET,
      redirect_uris: process.env.REDIRECT_URIS.split(","),
      grant_types: ["authorization_code"],
      response_types: ["code"],
      token_endpoint_auth_method: "client_secret_basic",
    },
  ],
  pkce: { required: () => true },
  scopes: ["openid", "email", "profile", "groups"],
  claims: {
    openid: ["sub"],
    email: ["email", "email_verified"],
    profile: ["preferred_username", "name"],
    groups: ["groups"],
  },
  features: { devInteractions: { enabled: true } },
  async findAccount(ctx, id) {
    const claims = accounts[id];
    if (!claims) return undefined;
    return { accountId: id, async claims() { return { sub: id, ...claims }; } };
  },
});
provider.proxy = false;
provider.listen(port, "127.0.0.1", () => console.log(`ready http://127.0.0.1:${port}`));
