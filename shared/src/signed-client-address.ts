/**
 * The client address, signed by the gateway for one backend. A backend must
 * know who its client was (the console's sign-in throttle counts per client
 * address; the audit trail records it), but X-Forwarded-For is whatever
 * reached the backend: anything that can reach its port directly could choose
 * an address per request. So the gateway signs the address it derived into
 * every request it forwards, console routes included (which carry no tenant
 * headers), with the secret of the backend's audience, over the method, the
 * path with query, the audience and a timestamp; the backend takes its client
 * address from there and from nothing else. The headers are `x-tenant-*`, so
 * the gateway removes any a caller sent.
 */
import { createHmac, timingSafeEqual } from 'node:crypto'
import type { FastifyInstance, FastifyRequest } from 'fastify'
import fp from 'fastify-plugin'
import { HmacSha256 } from './hmac-sha256.js'
import { normalizeAddress } from './ip-address.js'
import type { ReceivedRequest, SignedRequest, SigningSecret, Signer } from './tenant-signature.js'
import { DEFAULT_REPLAY_WINDOW_SECONDS } from './tenant-signature.js'

export const clientAddressHeaders = {
  address: 'x-tenant-client-address',
  /** `<unix seconds>.<hex HMAC-SHA256>` */
  signature: 'x-tenant-client-signature',
} as const

type AddressedRequest = Pick<SignedRequest, 'method' | 'pathWithQuery' | 'audience'>

/** Its own first line, so this MAC can never be taken for a tenant signature under the same secret, or the reverse. */
function canonical(request: AddressedRequest, timestamp: string, address: string): string {
  return `client-address v1\n${request.method.toUpperCase()}\n${request.pathWithQuery}\n${request.audience}\n${timestamp}\n${address}`
}

function macHex(secret: Signer, data: string): string {
  return secret instanceof HmacSha256 ? secret.hex(data) : createHmac('sha256', secret).update(data).digest('hex')
}

/** Appends the signed client address (the gateway's side) to a flat `[name, value, …]` header list. */
export function appendClientAddress(list: string[], secret: Signer, request: AddressedRequest, address: string, nowSeconds: number): void {
  const timestamp = String(Math.floor(nowSeconds))
  list.push(clientAddressHeaders.address, address, clientAddressHeaders.signature, `${timestamp}.${macHex(secret, canonical(request, timestamp, address))}`)
}

const SIGNATURE_PATTERN = /^([0-9]{1,12})\.([0-9a-f]{64})$/

/**
 * The client address the gateway signed for this request, or undefined when
 * there is none that verifies (missing, malformed, stale, another request's
 * or another backend's). Comparisons of MACs are constant-time.
 */
export function verifiedClientAddress(
  headers: Record<string, string | string[] | undefined>,
  received: ReceivedRequest,
  secrets: readonly SigningSecret[],
  nowSeconds: number,
  windowSeconds = DEFAULT_REPLAY_WINDOW_SECONDS,
): string | undefined {
  const address = headers[clientAddressHeaders.address]
  const signature = headers[clientAddressHeaders.signature]
  if (typeof address !== 'string' || typeof signature !== 'string' || normalizeAddress(address) === undefined) return undefined
  const parsed = SIGNATURE_PATTERN.exec(signature)
  if (parsed === null || Math.abs(nowSeconds - Number(parsed[1])) > windowSeconds) return undefined
  const presented = Buffer.from(parsed[2]!, 'hex')
  const data = canonical(received, parsed[1]!, address)
  let matched = false
  for (const secret of secrets) matched = timingSafeEqual(createHmac('sha256', secret).update(data).digest(), presented) || matched
  return matched ? address : undefined
}

export interface SignedClientAddressOptions {
  audience: string
  secrets: readonly SigningSecret[]
  now?: () => number
}

/**
 * The backend's side, for a server that trusts exactly one proxy hop
 * (`trustProxy` answering true for hop 0 only): before anything else reads
 * `request.ip`, X-Forwarded-For is replaced by the address the gateway signed,
 * or removed when none verifies, so `request.ip` is the signed address or the
 * TCP peer, never an address a caller wrote.
 */
export const signedClientAddress = fp(
  async (app: FastifyInstance, options: SignedClientAddressOptions) => {
    const secrets = [...options.secrets]
    const now = options.now ?? (() => Date.now() / 1000)
    app.addHook('onRequest', async (request: FastifyRequest) => {
      const headers = request.raw.headers
      const address = verifiedClientAddress(
        headers,
        { method: request.method, pathWithQuery: request.raw.url ?? '', audience: options.audience },
        secrets,
        now(),
      )
      if (address === undefined) delete headers['x-forwarded-for']
      else headers['x-forwarded-for'] = address
    })
  },
  { name: 'signed-client-address', fastify: '5.x' },
)
