/**
 * The one way a webhook leaves this service: a POST through an undici Agent
 * whose connections are checked on the address actually connected. The host
 * name is resolved once, inside the connection (the `lookup` below), and the
 * connection is refused unless every address it resolves to is public; a
 * literal address is checked before connecting, and the connected socket's
 * peer once more. So an answer that changes between a check and the connect
 * (DNS rebinding) gains nothing: there is no separate check. Redirects are not
 * followed (undici's request never does), the whole exchange has a deadline,
 * and at most 4 KiB of a response body is read.
 */
import { lookup as dnsLookup } from 'node:dns'
import type { LookupAddress, LookupOptions } from 'node:dns'
import { isIP } from 'node:net'
import type { Socket } from 'node:net'
import { Agent, buildConnector, request } from 'undici'
import { isPublicAddress } from './address-policy.js'
import type { TargetPolicy } from './address-policy.js'

/** Resolves a host name to all its addresses (dns.lookup with all: true by default; tests pass their own). */
export type Resolver = (hostname: string) => Promise<LookupAddress[]>

export const systemResolver: Resolver = (hostname) =>
  new Promise((resolve, reject) => {
    dnsLookup(hostname, { all: true, verbatim: true }, (error, addresses) => (error === null ? resolve(addresses) : reject(error)))
  })

export const MAX_RESPONSE_BODY_BYTES = 4096
export const DELIVERY_DEADLINE_MS = 10_000

export class RefusedAddressError extends Error {
  constructor(what: string) {
    super(`refused to connect to ${what}: not a public address`)
    this.name = 'RefusedAddressError'
  }
}

type LookupCallback = (error: NodeJS.ErrnoException | null, address: string | LookupAddress[], family?: number) => void

/** net.connect's `lookup`: every resolved address must be public, or the connection is refused. */
function guardedLookup(resolver: Resolver): (hostname: string, options: LookupOptions, callback: LookupCallback) => void {
  return (hostname, options, callback) => {
    resolver(hostname).then(
      (addresses) => {
        const refused = addresses.find((entry) => !isPublicAddress(entry.address))
        const first = addresses[0]
        if (refused !== undefined || first === undefined) {
          callback(new RefusedAddressError(`${hostname} (${refused?.address ?? 'no address'})`), '')
          return
        }
        if (options.all === true) callback(null, addresses)
        else callback(null, first.address, first.family)
      },
      (error: NodeJS.ErrnoException) => callback(error, ''),
    )
  }
}

export interface OutboundOptions extends TargetPolicy {
  resolver?: Resolver
  /** Extra trusted certificate authorities (tests' own CA); the system's otherwise. */
  ca?: string
}

/** The Agent every delivery goes through. */
export function createOutboundAgent(options: OutboundOptions): Agent {
  if (options.allowPrivateAddresses) return new Agent({ connect: options.ca === undefined ? {} : { ca: options.ca } })
  const connector = buildConnector({ lookup: guardedLookup(options.resolver ?? systemResolver), ...(options.ca === undefined ? {} : { ca: options.ca }) })
  return new Agent({
    connect: (connectOptions, callback) => {
      const host = connectOptions.hostname.replace(/^\[|\]$/g, '')
      if (isIP(host) !== 0 && !isPublicAddress(host)) {
        callback(new RefusedAddressError(host), null)
        return
      }
      connector(connectOptions, (error, socket) => {
        if (error !== null) return callback(error, null)
        const peer = (socket as Socket).remoteAddress
        if (peer === undefined || !isPublicAddress(peer)) {
          socket.destroy()
          return callback(new RefusedAddressError(peer ?? 'an unknown peer'), null)
        }
        callback(null, socket)
      })
    },
  })
}

export interface DeliveryOutcome {
  /** The answer's status; null when there was none (refused, unreachable, timed out). */
  status: number | null
  durationMs: number
  /** What went wrong, in a line; null on a 2xx. */
  error: string | null
}

/** Reads and drops at most MAX_RESPONSE_BODY_BYTES of a body, then lets the rest go. */
async function drainBounded(body: AsyncIterable<Buffer> & { destroy(): unknown }): Promise<void> {
  let read = 0
  for await (const chunk of body) {
    read += chunk.length
    if (read >= MAX_RESPONSE_BODY_BYTES) break
  }
  body.destroy()
}

/** POSTs one signed body; never throws. */
export async function postWebhook(
  agent: Agent,
  url: string,
  headers: Record<string, string>,
  body: string,
  deadlineMs: number = DELIVERY_DEADLINE_MS,
): Promise<DeliveryOutcome> {
  const started = performance.now()
  const elapsed = (): number => Math.round(performance.now() - started)
  try {
    const response = await request(url, {
      method: 'POST',
      dispatcher: agent,
      headers: { ...headers, 'content-type': 'application/json', 'user-agent': 'scoped-api-webhooks' },
      body,
      signal: AbortSignal.timeout(deadlineMs),
    })
    await drainBounded(response.body)
    const ok = response.statusCode >= 200 && response.statusCode < 300
    return { status: response.statusCode, durationMs: elapsed(), error: ok ? null : `answered ${response.statusCode}` }
  } catch (error) {
    return { status: null, durationMs: elapsed(), error: describe(error, deadlineMs) }
  }
}

function describe(error: unknown, deadlineMs: number): string {
  const failure = error as { name?: string; code?: string; message?: string; cause?: unknown }
  if (failure.name === 'TimeoutError' || failure.name === 'AbortError') return `no answer within ${deadlineMs} ms`
  const cause = failure.cause instanceof Error ? failure.cause : undefined
  const message = (cause ?? (error instanceof Error ? error : undefined))?.message ?? String(error)
  return message.slice(0, 300)
}
