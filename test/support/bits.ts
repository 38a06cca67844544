/** float64 values as their exact bit patterns, so a comparison cannot pass on a rounded value. */
export function float64Bits(values: readonly number[]): string[] {
  const view = new DataView(new ArrayBuffer(8));
  return values.map((v) => {
    view.setFloat64(0, v, true);
    return view.getBigUint64(0, true).toString(16).padStart(16, '0');
  });
}
