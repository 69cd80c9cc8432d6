/**
 * Sentinel queue addresses, apart from the queue itself: `berth start` checks the address while
 * reading its configuration, which must not load the Redis client (see config.cli.test.ts).
 */
/** What a Sentinel queue address names. */
export interface SentinelAddress {
  /** The master group name the sentinels monitor. */
  masterName: string;
  sentinels: Array<{ host: string; port: number }>;
  username?: string;
  password?: string;
  db: number;
  tls: boolean;
}

/**
 * Parses a Sentinel queue address as go-vela/server's queue/redis/redis.go failoverFromOptions
 * reads it: go-redis parses the URL, then the host (brackets and a `:6379` suffix stripped) is a
 * comma list whose first element is the master name and the rest the sentinels, e.g.
 * `redis://:secret@[mymaster,10.0.0.1:26379,10.0.0.2:26379]/0`. A sentinel without a port gets
 * 26379 (Sentinel's default). Throws a message naming what is wrong.
 */
export function parseSentinelUrl(url: string): SentinelAddress {
  const m = /^(rediss?):\/\/(?:([^@/]*)@)?([^/]*?)(?:\/(\d*))?$/.exec(url.trim());
  if (!m) throw new Error(`the queue address ${JSON.stringify(url)} is not a Sentinel address: use redis://[:password@][master,host:26379,…][/db]`);
  const [, scheme, auth, rawHost = '', db] = m;
  let host = rawHost.replace(/:6379$/, '');
  host = host.replace(/^\[/, '').replace(/\]$/, '');
  const [masterName = '', ...rest] = host.split(',').map((h) => h.trim());
  if (masterName === '' || rest.length === 0) {
    throw new Error(
      `the queue address ${JSON.stringify(url)} names no ${masterName === '' ? 'master' : 'sentinel'}: with VELA_QUEUE_CLUSTER use redis://[:password@][master,host:26379,…][/db]`,
    );
  }
  const sentinels = rest.map((h) => {
    const hm = /^(.*?)(?::(\d+))?$/.exec(h)!;
    const hostname = (hm[1] ?? '').replace(/^\[|\]$/g, '');
    if (hostname === '') throw new Error(`the queue address ${JSON.stringify(url)} has an empty sentinel host`);
    return { host: hostname, port: hm[2] ? Number(hm[2]) : 26379 };
  });
  const out: SentinelAddress = { masterName, sentinels, db: db ? Number(db) : 0, tls: scheme === 'rediss' };
  if (auth !== undefined) {
    const i = auth.indexOf(':');
    const user = decodeURIComponent(i >= 0 ? auth.slice(0, i) : auth);
    const pass = i >= 0 ? decodeURIComponent(auth.slice(i + 1)) : '';
    if (i >= 0) {
      if (pass !== '') out.password = pass;
      if (user !== '') out.username = user;
    } else if (user !== '') out.password = user;
  }
  return out;
}
