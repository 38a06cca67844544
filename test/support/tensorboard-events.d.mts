/** Types of tensorboard-events.mjs (plain Node, so the NeMo-RL stand-in runs it without a build). */
export function frame(event: Buffer): Buffer;
export function fileVersionEvent(wallTime?: number): Buffer;
export function scalarEvent(step: number, scalars: [string, number][], wallTime?: number): Buffer;
export function appendTensorboardStep(file: string, step: number, scalars: Record<string, number>): void;
