import fs from 'node:fs';
import path from 'node:path';
import { isLink } from '../../core/fs-kind.js';

/**
 * The host environment's COPY reads from the task's environment/ and writes into the sample's
 * workspace on the host itself, not inside an image build. A symlink in environment/ would make
 * that copy read a host file (a COPY source that is a link, or a path through one, to outside), and
 * a link an earlier COPY put in the workspace would make a later one write through it onto the
 * host. These checks keep both ends inside their folders: a source must resolve (symlinks followed)
 * inside environment/, a link inside a copied folder must point inside environment/ from where it
 * sits (it is copied as a link, as Docker does, and then means the same file the task shipped), and
 * nothing is written where the workspace path resolves outside the workspace.
 *
 * A link copied as a link is not followed by polar; inside the sandbox the agent's process resolves
 * it against the sandbox's own view, so it reaches nothing the agent could not reach with its own
 * `ln -s`. Links to outside environment/ are refused all the same: on the host they name host paths,
 * and in the task's image they would name the image's files, which the host cannot reproduce.
 */

/** Whether `p` is `root` or below it (both absolute, normalised). */
export function within(root: string, p: string): boolean {
  return p === root || p.startsWith(root.endsWith(path.sep) ? root : `${root}${path.sep}`);
}

/** realpath, or null when the path (or a link on it) does not resolve. */
function real(p: string): string | null {
  try {
    return fs.realpathSync(p);
  } catch {
    return null;
  }
}

/**
 * Why a COPY source may not be copied (null when it may): it resolves outside the build context.
 * `context` is environment/; `from` an absolute path inside it as written.
 */
export function sourceEscape(context: string, from: string): string | null {
  const root = real(context);
  if (root === null) return 'environment/ does not resolve';
  const target = real(from);
  // A missing source is reported by the caller (no such file); a dangling link is this check's.
  if (target === null) return isLink(from) ? `is a symlink to ${linkTarget(from)}, which does not resolve` : null;
  if (within(root, target)) return null;
  return `resolves outside environment/ (to ${target}, through a symlink)`;
}

/**
 * Why a symlink met inside a copied folder may not be copied (null when it may): its text is an
 * absolute path (a path of this machine, here), or it leads out of environment/ from where the link
 * sits, as written or once every link on the way is followed. A dangling link is judged by its text.
 */
export function linkEscape(context: string, link: string): string | null {
  const text = linkTarget(link);
  if (path.isAbsolute(text)) return `is a symlink to the absolute path ${text}`;
  const resolved = real(link);
  if (!within(context, path.resolve(path.dirname(link), text)) || (resolved !== null && !within(real(context) ?? context, resolved)))
    return `is a symlink to ${text}, outside environment/`;
  return null;
}

/**
 * Why writing `dest` (a path below the workspace `root`) would land outside the workspace (null
 * when it would not): the nearest existing folder on its way resolves elsewhere, through a link an
 * earlier COPY left there.
 */
export function destEscape(root: string, dest: string): string | null {
  const top = real(root) ?? root;
  let p = dest === root ? root : path.dirname(dest);
  while (within(root, p)) {
    const r = real(p);
    if (r !== null) return within(top, r) ? null : `${path.relative(root, p) || '.'} is a link to outside the workspace (${r})`;
    if (isLink(p)) return `${path.relative(root, p)} is a link that does not resolve`;
    p = path.dirname(p);
  }
  return 'is outside the workspace';
}

/**
 * The symlinks a COPY of folder `dir` would carry that point outside environment/, with why
 * (paths relative to environment/), skipping what .dockerignore leaves out (`kept`). Links to
 * folders are not entered: they are copied as links.
 */
export function folderEscapes(context: string, dir: string, kept: (abs: string, isDir: boolean) => boolean): string[] {
  const out: string[] = [];
  const walk = (d: string) => {
    let entries: fs.Dirent[];
    try {
      entries = fs.readdirSync(d, { withFileTypes: true });
    } catch {
      return;
    }
    for (const e of entries) {
      const abs = path.join(d, e.name);
      if (!kept(abs, e.isDirectory())) continue;
      if (e.isSymbolicLink()) {
        const why = linkEscape(context, abs);
        if (why) out.push(`${path.relative(context, abs)} ${why}`);
      } else if (e.isDirectory()) walk(abs);
    }
  };
  walk(dir);
  return out;
}

function linkTarget(p: string): string {
  try {
    return fs.readlinkSync(p);
  } catch {
    return '?';
  }
}
