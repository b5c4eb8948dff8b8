package sessionlog

// ScanSummary exposes the fast path of SummarizeLine, to check that the
// lines EncodeBatch writes take it.
func ScanSummary(line []byte) bool {
	_, ok := scanSummary(line)
	return ok
}
