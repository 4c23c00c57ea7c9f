// node-oidc-provider with a Redis adapter and one pre-registered client: the peer of Tessera's
// code exchange benchmark (tests/benchmarks/test_peer_bench.py).
//   node provider.mjs serve <port> <redis-url> <key.json>   answer POST /token until killed
//   node provider.mjs mint <count> <redis-url>              print <count> fresh `code verifier` lines
// Each code is minted as a browser sign-in leaves it: a saved Session whose authorization holds the
// grant, the code bound to it (expiresWithSession, sid) and to a PKCE S256 challenge; the client
// authenticates with client_secret_basic. That is the work Tessera's exchange does.
import Redis from 'ioredis';
import { createHash, randomBytes } from 'node:crypto';
import Provider from 'oidc-provider';
import { readFileSync } from 'node:fs';

const [mode, arg, redisUrl, keyFile] = process.argv.slice(2);
const redis = new Redis(redisUrl, { keyPrefix: 'oidc-peer:' });
const consumable = new Set(['AuthorizationCode', 'RefreshToken', 'DeviceCode', 'BackchannelAuthenticationRequest']);
const grantable = new Set(['AccessToken', 'AuthorizationCode', 'RefreshToken', 'DeviceCode', 'BackchannelAuthenticationRequest']);

// The Redis adapter of node-oidc-provider's example/adapters/redis.js.
class RedisAdapter {
  constructor(name) { this.name = name; }
  key(id) { return `${this.name}:${id}`; }
  async upsert(id, payload, expiresIn) {
    const key = this.key(id);
    const multi = redis.multi();
    if (consumable.has(this.name)) multi.hmset(key, { payload: JSON.stringify(payload) });
    else multi.set(key, JSON.stringify(payload));
    if (expiresIn) multi.expire(key, expiresIn);
    if (grantable.has(this.name) && payload.grantId) {
      const grantKey = `grant:${payload.grantId}`;
      multi.rpush(grantKey, key);
      const ttl = await redis.ttl(grantKey);
      if (expiresIn > ttl) multi.expire(grantKey, expiresIn);
    }
    if (payload.userCode) multi.set(`userCode:${payload.userCode}`, id, 'EX', expiresIn);
    if (payload.uid) multi.set(`uid:${payload.uid}`, id, 'EX', expiresIn);
    await multi.exec();
  }
  async find(id) {
    const data = consumable.has(this.name) ? await redis.hgetall(this.key(id)) : await redis.get(this.key(id));
    if (!data || (typeof data === 'object' && !Object.keys(data).length)) return undefined;
    if (typeof data === 'string') return JSON.parse(data);
    const { payload, ...rest } = data;
    return { ...rest, ...JSON.parse(payload) };
  }
  async findByUid(uid) { const id = await redis.get(`uid:${uid}`); return id ? this.find(id) : undefined; }
  async findByUserCode(code) { const id = await redis.get(`userCode:${code}`); return id ? this.find(id) : undefined; }
  async destroy(id) { await redis.del(this.key(id)); }
  async revokeByGrantId(grantId) {
    const multi = redis.multi();
    const tokens = await redis.lrange(`grant:${grantId}`, 0, -1);
    tokens.forEach((token) => multi.del(token.replace(/^oidc-peer:/, '')));
    multi.del(`grant:${grantId}`);
    await multi.exec();
  }
  async consume(id) { await redis.hset(this.key(id), 'consumed', Math.floor(Date.now() / 1000)); }
}

// tests/benchmarks/test_peer_bench.py NODE_CLIENT mirrors this client.
const CLIENT = {
  client_id: 'bench', client_secret: 'bench-secret-0123456789abcdef0123456789abcdef',
  redirect_uris: ['https://rp.example/callback'], grant_types: ['authorization_code'],
  response_types: ['code'], token_endpoint_auth_method: 'client_secret_basic',
};

// PEER_JWT_ACCESS_TOKENS=1: access tokens are RS256 JWTs (RFC 9068) for one resource, as Tessera's,
// so both servers sign twice per exchange.
const JWT_ACCESS_TOKENS = process.env.PEER_JWT_ACCESS_TOKENS === '1';
const RESOURCE = 'urn:tessera-bench:api';
const resourceIndicators = JWT_ACCESS_TOKENS ? {
  enabled: true,
  defaultResource: () => RESOURCE,
  useGrantedResource: () => true,
  getResourceServerInfo: () => ({
    scope: 'openid profile email', audience: CLIENT.client_id, accessTokenFormat: 'jwt', jwt: { sign: { alg: 'RS256' } },
  }),
} : undefined;

function provider(issuer, jwk) {
  return new Provider(issuer, {
    adapter: RedisAdapter,
    clients: [CLIENT],
    jwks: jwk ? { keys: [jwk] } : undefined,
    findAccount: async (_ctx, sub) => ({ accountId: sub, claims: async () => ({ sub, email: `${sub}@example.org`, name: 'Bench User' }) }),
    claims: { openid: ['sub'], email: ['email'], profile: ['name'] },
    pkce: { required: () => true },
    ttl: { AccessToken: 3600, AuthorizationCode: 600, Grant: 3600, IdToken: 3600, Session: 3600 },
    features: { devInteractions: { enabled: false }, ...(resourceIndicators ? { resourceIndicators } : {}) },
  });
}

if (mode === 'serve') {
  const jwk = JSON.parse(readFileSync(keyFile, 'utf8'));
  const oidc = provider(`http://127.0.0.1:${arg}`, jwk);
  if (process.env.PEER_DEBUG) oidc.on('grant.error', (_ctx, err) => console.error(err.error_detail));
  oidc.listen(Number(arg), '127.0.0.1', () => console.log('ready'));
} else if (mode === 'mint') {
  console.info = () => {}; // stdout carries only the codes
  const oidc = provider('http://127.0.0.1:1');
  const client = await oidc.Client.find(CLIENT.client_id);
  const lines = [];
  for (let i = 0; i < Number(arg); i += 1) {
    const accountId = `user-${i}`;
    const grant = new oidc.Grant({ accountId, clientId: CLIENT.client_id });
    grant.addOIDCScope('openid profile email');
    if (JWT_ACCESS_TOKENS) grant.addResourceScope(RESOURCE, 'openid profile email');
    const grantId = await grant.save();
    const session = new oidc.Session({ accountId, loginTs: Math.floor(Date.now() / 1000) });
    session.ensureClientContainer(CLIENT.client_id);
    session.grantIdFor(CLIENT.client_id, grantId);
    await session.save(3600);
    const verifier = randomBytes(32).toString('base64url');
    const code = new oidc.AuthorizationCode({
      accountId, client, grantId, scope: 'openid profile email', nonce: 'bench-nonce',
      redirectUri: CLIENT.redirect_uris[0], authTime: session.loginTs,
      sessionUid: session.uid, sid: session.sidFor(CLIENT.client_id), expiresWithSession: true,
      codeChallenge: createHash('sha256').update(verifier).digest('base64url'), codeChallengeMethod: 'S256',
      ...(JWT_ACCESS_TOKENS ? { resource: RESOURCE } : {}),
    });
    lines.push(`${await code.save()} ${verifier}`);
  }
  process.stdout.write(lines.join('\n') + '\n');
  await redis.quit();
}
