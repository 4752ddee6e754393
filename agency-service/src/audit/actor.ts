/**
 * Who did something, for the audit trail: a console user (by user id), an
 * operator through `ctl` (`ctl:<CTL_ACTOR>`), or an API key (by key id), or,
 * for a change nobody named (written by the database's triggers, migration
 * 015), `unattributed` with the database login that made it; and
 * the client address it came from when there is one (the console and the API
 * read request.ip, which is the address the gateway signed for the request,
 * shared/src/signed-client-address.ts; ctl has none).
 *
 * Code that has only a name passes it as text, as the key records have always
 * held it (`created_by`, `revoked_by`): `user:<id>`, `api-key:<id>`, and
 * anything else (`ctl:<name>`, a test's `test`) is an operator.
 */
import { normalizeAddress } from '@scoped/shared/ip-address'

export type ActorKind = 'user' | 'cli' | 'key' | 'unattributed'

export interface Actor {
  kind: ActorKind
  /** The user id, the API key id, or the operator's name (`ctl:<CTL_ACTOR>`). */
  id: string
  /** The client address, normalized; null when there is none (ctl) or it is not an IP address. */
  clientAddress: string | null
}

/** An actor, or its name as text. */
export type ActorInput = string | Actor

const MAX_ACTOR_ID_LENGTH = 200

export function toActor(input: ActorInput): Actor {
  if (typeof input !== 'string') return input
  if (input.startsWith('user:') && input.length > 'user:'.length) return { kind: 'user', id: input.slice('user:'.length), clientAddress: null }
  if (input.startsWith('api-key:') && input.length > 'api-key:'.length) return { kind: 'key', id: input.slice('api-key:'.length), clientAddress: null }
  return { kind: 'cli', id: input.slice(0, MAX_ACTOR_ID_LENGTH) || 'unknown', clientAddress: null }
}

/** The actor as text, as `created_by` and `revoked_by` hold it. */
export function actorText(actor: Actor): string {
  switch (actor.kind) {
    case 'user':
      return `user:${actor.id}`
    case 'key':
      return `api-key:${actor.id}`
    case 'cli':
      return actor.id
    case 'unattributed':
      return `unattributed:${actor.id}`
  }
}

export function userActor(userId: string, clientAddress: string | undefined): Actor {
  return { kind: 'user', id: userId, clientAddress: normalizedOrNull(clientAddress) }
}

export function keyActor(keyId: string, clientAddress: string | undefined): Actor {
  return { kind: 'key', id: keyId, clientAddress: normalizedOrNull(clientAddress) }
}

function normalizedOrNull(address: string | undefined): string | null {
  return address === undefined ? null : (normalizeAddress(address) ?? null)
}
