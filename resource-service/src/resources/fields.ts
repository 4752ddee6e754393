/** Field checks that JSON schema expresses poorly, with messages that name the field. */
import { ApiError } from '@scoped/shared/errors'

export const NAME_MAX_LENGTH = 200

// eslint-disable-next-line no-control-regex
const CONTROL_CHARACTERS = /[\u0000-\u001f\u007f]/

/** A display name: trimmed, not blank, no control characters. */
export function cleanName(value: unknown, field: string): string {
  const name = typeof value === 'string' ? value.trim() : ''
  if (name.length < 1 || name.length > NAME_MAX_LENGTH || CONTROL_CHARACTERS.test(name)) {
    throw new ApiError('badRequest', `${field} must be 1 to ${NAME_MAX_LENGTH} printable characters`)
  }
  return name
}

/** Schema of a name; `cleanName` then trims it and refuses blanks and control characters. */
export const nameSchema = { type: 'string', minLength: 1, maxLength: NAME_MAX_LENGTH } as const

export function iso(date: Date): string {
  return date.toISOString()
}
