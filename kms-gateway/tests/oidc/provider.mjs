// A real OpenID provider for kms-gateway's tests: Node's `oidc-provider`
// (the version pinned in package-lock.json), on a loopback port, issuing
// RFC 9068 JWT access tokens through the client_credentials grant.
//
// Environment:
//   PORT       the port to listen on (0 or unset: any free one);
//   ALGS       comma-separated algorithms to hold keys for and sign with
//              (default: EdDSA,Ed25519,RS256,PS256,ES256).
// Each start makes new keys (new kids). The resource indicator
// https://api.example/<ALG> gets an access token signed with <ALG>,
// audience https://api.example.
// GET /test/id_token?sub=SUB: an OpenID Connect ID token for SUB, issued
// by the provider itself to the client `svc` (`typ` JWT, `aud` svc,
// signed RS256 with the same keys as the access tokens), for the tests
// that must tell the two apart without a browser's login.
// Stdout: "listening http://127.0.0.1:<port>" once, then "jwks" for every
// request to the JWK Set (the tests count them). Exits on SIGTERM.
import * as crypto from 'node:crypto';
import * as http from 'node:http';

import Provider from 'oidc-provider';

const algs = (process.env.ALGS || 'EdDSA,Ed25519,RS256,PS256,ES256').split(',');
const run = crypto.randomBytes(4).toString('hex');

function jwk(type, options, kid) {
  const { privateKey } = crypto.generateKeyPairSync(type, options);
  return { ...privateKey.export({ format: 'jwk' }), kid, use: 'sig' };
}

const keys = [];
if (algs.some((a) => a === 'EdDSA' || a === 'Ed25519')) keys.push(jwk('ed25519', {}, `ed-${run}`));
if (algs.some((a) => a.startsWith('RS') || a.startsWith('PS'))) {
  keys.push(jwk('rsa', { modulusLength: 2048 }, `rsa-${run}`));
}
if (algs.includes('ES256')) keys.push(jwk('ec', { namedCurve: 'P-256' }, `ec-${run}`));

const server = http.createServer();
server.listen(Number(process.env.PORT || 0), '127.0.0.1', () => {
  const { port } = server.address();
  const issuer = `http://127.0.0.1:${port}`;
  const provider = new Provider(issuer, {
    jwks: { keys },
    clients: [{
      client_id: 'svc',
      client_secret: 'svc-secret',
      grant_types: ['client_credentials'],
      redirect_uris: [],
      response_types: [],
    }],
    features: {
      clientCredentials: { enabled: true },
      resourceIndicators: {
        enabled: true,
        getResourceServerInfo(ctx, resource) {
          const alg = new URL(resource).pathname.slice(1);
          if (!algs.includes(alg)) throw new Error(`no key for ${alg}`);
          return {
            scope: 'api',
            audience: 'https://api.example',
            accessTokenTTL: 600,
            accessTokenFormat: 'jwt',
            jwt: { sign: { alg } },
          };
        },
      },
    },
    enabledJWA: {
      idTokenSigningAlgValues: ['RS256', 'PS256', 'ES256', 'Ed25519', 'EdDSA'],
    },
  });
  provider.use(async (ctx, next) => {
    if (ctx.path === '/jwks') console.log('jwks');
    await next();
  });
  const callback = provider.callback();
  server.on('request', async (req, res) => {
    const url = new URL(req.url, issuer);
    if (url.pathname !== '/test/id_token') return callback(req, res);
    const client = await provider.Client.find('svc');
    const token = new provider.IdToken({ sub: url.searchParams.get('sub') || 'alice' }, { client });
    token.scope = 'openid';
    res.end(await token.issue({ use: 'idtoken' }));
  });
  console.log(`listening ${issuer}`);
});

process.on('SIGTERM', () => server.close(() => process.exit(0)));
