package workqueue

const (
	// minFIFO is the smallest non-empty buffer of a fifo.
	minFIFO = 16
	// keepFIFO is the largest buffer a fifo keeps however empty it gets, so
	// that a queue filling and draining small batches does not reallocate.
	keepFIFO = 1024
)

// fifo is a first-in first-out queue on a circular buffer: push, pop and indexing are amortized
// O(1) and allocate only when the buffer grows or shrinks.
//
// Invariants: len(buf) is 0 or a power of two >= minFIFO; the elements are
// buf[(head+i)&(len(buf)-1)] for i in [0, n); every other slot holds the zero
// value, so the fifo keeps nothing reachable that it does not hold.
type fifo[T any] struct {
	buf  []T
	head int
	n    int
}

func (r *fifo[T]) len() int { return r.n }

// at returns the i-th element from the front. It requires 0 <= i < r.len().
func (r *fifo[T]) at(i int) *T { return &r.buf[(r.head+i)&(len(r.buf)-1)] }

// front returns the first element. It requires r.len() > 0.
func (r *fifo[T]) front() *T { return &r.buf[r.head] }

func (r *fifo[T]) push(v T) {
	if r.n == len(r.buf) {
		r.resize(max(2*len(r.buf), minFIFO))
	}
	r.buf[(r.head+r.n)&(len(r.buf)-1)] = v
	r.n++
}

// pop removes and returns the first element. It requires r.len() > 0.
func (r *fifo[T]) pop() T {
	v := r.buf[r.head]
	var zero T
	r.buf[r.head] = zero
	r.head = (r.head + 1) & (len(r.buf) - 1)
	r.n--
	// Give memory back after a burst (say, a full resync of a large cache),
	// halving only at a quarter full so that push and pop stay amortized O(1).
	if len(r.buf) > keepFIFO && r.n <= len(r.buf)/4 {
		r.resize(len(r.buf) / 2)
	}
	return v
}

// trim releases the buffer of an empty fifo larger than minFIFO.
func (r *fifo[T]) trim() {
	if r.n == 0 && len(r.buf) > minFIFO {
		r.buf, r.head = nil, 0
	}
}

func (r *fifo[T]) resize(size int) {
	buf := make([]T, size)
	if r.n > 0 {
		if end := r.head + r.n; end <= len(r.buf) {
			copy(buf, r.buf[r.head:end])
		} else {
			k := copy(buf, r.buf[r.head:])
			copy(buf[k:], r.buf[:end-len(r.buf)])
		}
	}
	r.buf, r.head = buf, 0
}
