package topology

// prefixEnd is the smallest key greater than every key that begins with p,
// the exclusive upper bound of a range scan over the prefix p; nil, which
// the stores read as no upper bound, if there is none (p is empty or all
// 0xff). The result has its own backing array: p is not modified.
func prefixEnd(p []byte) []byte {
	end := append([]byte(nil), p...)
	for i := len(end) - 1; i >= 0; i-- {
		if end[i]++; end[i] != 0 {
			return end[:i+1]
		}
	}
	return nil
}
