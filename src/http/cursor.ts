/**
 * A page cursor of the JSON routes: the last item's time and id (items of one instant are ordered by
 * id), as one opaque base64url string the client hands back unchanged as `cursor`.
 */
import { type ErrorCode, OptmarkError } from '../errors.js';

export function timeCursor(time: string, id: string): string {
  return Buffer.from(`${time}|${id}`, 'utf8').toString('base64url');
}

/**
 * The time and id a cursor names; `code` (a 400) for anything this server did not hand out, or whose id
 * does not match `idPattern`.
 */
export function parseTimeCursor(cursor: string, code: ErrorCode, idPattern: RegExp): { time: string; id: string } {
  const bad = new OptmarkError(code, '"cursor" must be the "next" value of a previous page, unchanged.');
  if (cursor.length > 200 || !/^[A-Za-z0-9_-]+$/.test(cursor)) throw bad;
  const [time, id, ...rest] = Buffer.from(cursor, 'base64url').toString('utf8').split('|');
  if (rest.length || !time || !id || Number.isNaN(Date.parse(time)) || !idPattern.test(id)) throw bad;
  return { time, id };
}
