// A caught allocation failure (Unsafe.allocateMemory beyond any machine),
// then implicit null checks: compiled code dereferences null and the JVM
// turns the SIGSEGV into a NullPointerException through its own handler.
// With -Xcheck:jni the JVM also checks, periodically, that its signal
// handlers are still its own.  Exit 0.
import java.lang.reflect.Field;

public class NullChecks {
    static int[] maybe(int i) { return (i % 1000 == 999) ? null : new int[1]; }

    public static void main(String[] args) throws Exception {
        Field f = Class.forName("sun.misc.Unsafe").getDeclaredField("theUnsafe");
        f.setAccessible(true);
        sun.misc.Unsafe unsafe = (sun.misc.Unsafe) f.get(null);
        try {
            unsafe.allocateMemory(1L << 50);
            System.out.println("allocated");
        } catch (OutOfMemoryError e) {
            System.out.println("caught OutOfMemoryError");
        }
        long npes = 0, sum = 0;
        for (int round = 0; round < 200; round++) {
            for (int i = 0; i < 20000; i++) {
                try { sum += maybe(i)[0]; } catch (NullPointerException e) { npes++; }
            }
            Thread.sleep(1);
        }
        System.out.println("null checks " + npes + " sum " + sum);
    }
}
