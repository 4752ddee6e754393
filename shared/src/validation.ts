/**
 * The checks of names and ids that every service, the CLI and the console
 * share, with messages that name the field at fault. JSON schema validates a
 * body's shape first; these do what a schema expresses poorly (trimming,
 * control characters) or the same way for input that no schema sees (CLI
 * arguments, path parameters, form fields).
 */
import { isUuid } from './db.js'
import type { ApiError, InputField } from './errors.js'
import { invalidField } from './errors.js'

/** The longest display name (agencies, sub-accounts, agents, contacts). */
export const NAME_MAX_LENGTH = 200

// eslint-disable-next-line no-control-regex
const CONTROL_CHARACTERS = /[\u0000-\u001f\u007f]/

/** A display name: trimmed, 1 to `maxLength` characters, no control characters; anything else is a 400 naming the field. */
export function requireName(value: unknown, field: InputField, maxLength: number = NAME_MAX_LENGTH): string {
  if (typeof value !== 'string') throw invalidField(field, 'is required')
  const name = value.trim()
  if (name.length < 1 || name.length > maxLength || CONTROL_CHARACTERS.test(name)) {
    throw invalidField(field, `must be 1 to ${maxLength} printable characters`)
  }
  return name
}

/** Schema of a name in a JSON body; `requireName` then trims it and refuses blanks and control characters. */
export const nameSchema = { type: 'string', minLength: 1, maxLength: NAME_MAX_LENGTH } as const

/** A UUID the caller supplied as input (a body field, a CLI argument), lowercased; anything else is a 400 naming the field. */
export function requireUuid(value: unknown, field: InputField): string {
  if (!isUuid(value)) throw invalidField(field, 'must be a UUID')
  return value.toLowerCase()
}

/**
 * The id in a path, lowercased. One that is not a UUID is answered exactly
 * like a UUID that names nothing (or another tenant's row): with `notFound()`.
 */
export function uuidOrNotFound(value: unknown, notFound: () => ApiError): string {
  if (!isUuid(value)) throw notFound()
  return value.toLowerCase()
}

const ISO_TIME = /^(\d{4})-(\d{2})-(\d{2})T(\d{2}):(\d{2})(?::(\d{2})(?:\.\d{1,9})?)?(Z|[+-]\d{2}:\d{2})$/

/**
 * An instant given as input: an ISO 8601 date and time with its offset
 * (`2030-01-31T12:00:00Z`, `2030-01-31T14:00+02:00`), a real calendar date;
 * anything else (no offset, a date alone, 31 February) is a 400 naming the field.
 */
export function requireIsoTime(value: unknown, field: InputField): Date {
  const invalid = invalidField(field, 'must be an ISO 8601 date and time with an offset, such as 2030-01-31T12:00:00Z')
  if (typeof value !== 'string') throw invalid
  const match = ISO_TIME.exec(value)
  if (match === null) throw invalid
  const [year, month, day, hour, minute, second] = match.slice(1, 7).map((part) => Number(part ?? 0)) as [number, number, number, number, number, number]
  const daysInMonth = new Date(Date.UTC(year, month, 0)).getUTCDate()
  if (month < 1 || month > 12 || day < 1 || day > daysInMonth || hour > 23 || minute > 59 || second > 59) throw invalid
  const time = Date.parse(value)
  if (Number.isNaN(time)) throw invalid
  return new Date(time)
}
