use kms::bus::{Backend, Bus, Overflow, TopicConfig};
fn main() {
    let backend = if std::env::args().nth(1).as_deref() == Some("classic") { Backend::Classic } else { Backend::Soa };
    let overflow = if std::env::args().nth(2).as_deref() == Some("reject") { Overflow::Reject } else { Overflow::Lag };
    let topic = Bus::new().topic::<u64>("p", TopicConfig { capacity: 1024, backend, overflow }).unwrap();
    let mut sub = topic.subscribe().unwrap();
    let p = topic.publisher();
    let t = std::time::Instant::now();
    let n = 50_000_000u64;
    let mut s = 0;
    for i in 0..n { let _ = p.publish(i); s += sub.try_recv().unwrap(); }
    println!("{} ns/op {}", t.elapsed().as_nanos() as f64 / n as f64, s);
}
