// The HAProxy configuration of the cluster (scripts/cluster.ts): text only, no process.

/** The HAProxy configuration: one frontend, round-robin over the instances, health from each one's /readyz. */
export function haproxyConfig(o: { port: number; statsPort: number; instances: { name: string; rpcPort: number; metricsPort: number }[] }): string {
  return [
    'global',
    '  maxconn 4096',
    '',
    'defaults',
    '  mode http',
    '  timeout connect 2s',
    '  timeout client 60s',
    '  timeout server 60s',
    // An upgraded WebSocket (raw stream, eth_subscribe) is a tunnel: idle up to an hour (the daemons ping it).
    '  timeout tunnel 1h',
    '  timeout http-keep-alive 10s',
    '',
    'frontend flashblocksd',
    `  bind 127.0.0.1:${o.port}`,
    // The edge: a client's own X-Forwarded-For is dropped, then HAProxy adds the peer it saw (the daemons trust it
    // through --trusted-proxies, so per-IP limits count real clients, not HAProxy).
    '  http-request del-header X-Forwarded-For',
    '  option forwardfor',
    '  default_backend instances',
    '',
    'backend instances',
    // Per request, also on a kept-alive client connection: consecutive requests of one client land on different
    // instances. X-Flashblock / X-Flashblock-Min headers pass through untouched.
    '  balance roundrobin',
    '  option httpchk GET /readyz',
    '  http-check expect status 200',
    '  default-server inter 1s fall 3 rise 2',
    ...o.instances.map((i) => `  server ${i.name} 127.0.0.1:${i.rpcPort} check port ${i.metricsPort}`),
    '',
    'listen stats',
    `  bind 127.0.0.1:${o.statsPort}`,
    '  stats enable',
    '  stats uri /',
    '  stats refresh 2s',
    '',
  ].join('\n');
}
