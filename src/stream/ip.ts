// Client addresses for the stream's limits: re-exported from src/limits/ip.ts, where the RPC quota reads them too.
export { CidrList, clientIp, normalizeIp } from '../limits/ip.js';
